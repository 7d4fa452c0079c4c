## tests: the local provider (state directory, records, lifecycle).
check_sandboxfs_SOURCES += %reldir%/check_local.c %reldir%/check_local_records.c \
	%reldir%/check_local_ctl.c
