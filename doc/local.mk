## doc
EXTRA_DIST += %reldir%/protocol-v1.md
