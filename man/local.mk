## man
dist_man_MANS += %reldir%/sandboxctl.1
dist_man_MANS += %reldir%/sandbox-agent.8
dist_man_MANS += %reldir%/sandboxfs.1
## Every option of the programs is in their pages, and the pages lint clean.
TESTS += tests/check_manpage.sh
EXTRA_DIST += tests/check_manpage.sh
