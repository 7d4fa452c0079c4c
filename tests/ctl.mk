## tests: the local provider (state directory, records, lifecycle).
check_sandboxfs_SOURCES += %reldir%/check_local.c
