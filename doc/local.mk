## doc
EXTRA_DIST += %reldir%/protocol-v1.md
EXTRA_DIST += %reldir%/commands.md
EXTRA_DIST += %reldir%/azure.md
EXTRA_DIST += %reldir%/protocol-ext.md
EXTRA_DIST += %reldir%/transport-rules.md
EXTRA_DIST += %reldir%/internals/transport.md %reldir%/internals/cache.md
