## The bottom layer, shared by every other: no network, no FUSE.
noinst_LIBRARIES += libsbfs_common.a
libsbfs_common_a_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PTHREAD_CFLAGS)
libsbfs_common_a_SOURCES = \
	%reldir%/log.c %reldir%/log.h \
	%reldir%/buf.c %reldir%/buf.h \
	%reldir%/xalloc.c %reldir%/xalloc.h \
	%reldir%/b64.c %reldir%/b64.h \
	%reldir%/token.c %reldir%/token.h \
	%reldir%/path.c %reldir%/path.h \
	%reldir%/unixurl.c %reldir%/unixurl.h \
	%reldir%/errname.c %reldir%/errname.h \
	%reldir%/proto.c %reldir%/proto.h %reldir%/proto_i.h \
	%reldir%/proto_exec.c %reldir%/proto_jobs.c %reldir%/proto_exec.h \
	%reldir%/proto_jscan.c %reldir%/proto_jscan_i.h \
	%reldir%/proto_files.c %reldir%/proto_ext.c %reldir%/proto_events.c \
	%reldir%/proto_files.h \
	%reldir%/proto_record.c %reldir%/proto_record.h \
	%reldir%/proto_azure.c %reldir%/proto_azure_exec.c \
	%reldir%/proto_azure.h \
	%reldir%/limits.c %reldir%/limits.h \
	%reldir%/clock.c %reldir%/clock.h \
	%reldir%/ids.c %reldir%/ids.h \
	%reldir%/fileio.c %reldir%/fileio.h \
	%reldir%/sleep.c %reldir%/sleep.h \
	%reldir%/dirstream.c %reldir%/dirstream.h \
	%reldir%/hmap.c %reldir%/hmap.h \
	%reldir%/dlist.c %reldir%/dlist.h \
	%reldir%/hex.c %reldir%/hex.h \
	%reldir%/httpstatus.c %reldir%/httpstatus.h \
	%reldir%/unixaddr.c %reldir%/unixaddr.h \
	%reldir%/numarg.c %reldir%/numarg.h \
	%reldir%/fdio.c %reldir%/fdio.h \
	%reldir%/strv.c %reldir%/strv.h \
	%reldir%/sigdefault.c %reldir%/sigdefault.h
