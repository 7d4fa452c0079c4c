## Shared by the agent, the client and sandboxctl.
libsandboxfs_a_SOURCES += \
	%reldir%/log.c %reldir%/log.h \
	%reldir%/buf.c %reldir%/buf.h \
	%reldir%/xalloc.c %reldir%/xalloc.h \
	%reldir%/b64.c %reldir%/b64.h \
	%reldir%/token.c %reldir%/token.h \
	%reldir%/path.c %reldir%/path.h \
	%reldir%/unixurl.c %reldir%/unixurl.h \
	%reldir%/errname.c %reldir%/errname.h \
	%reldir%/proto.c %reldir%/proto.h %reldir%/proto_i.h \
	%reldir%/proto_exec.c %reldir%/proto_exec.h \
	%reldir%/proto_files.c %reldir%/proto_ext.c %reldir%/proto_files.h \
	%reldir%/proto_record.c %reldir%/proto_record.h
