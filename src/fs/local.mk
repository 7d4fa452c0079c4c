## sandboxfs: the FUSE layer (libfuse 3 low-level API).
libsandboxfs_a_SOURCES += \
	%reldir%/fs_i.h
## files/ through protocol v1 only (strict agents) and native sessions.
libsandboxfs_a_SOURCES += \
	%reldir%/fs_files_v1.c %reldir%/fs_files_v1_i.h
libsandboxfs_a_SOURCES += \
	%reldir%/ll.c %reldir%/inodes.c %reldir%/inodes.h \
	%reldir%/fs.c %reldir%/fs.h %reldir%/events.c \
	%reldir%/opts.c %reldir%/tune.c \
	%reldir%/sandbox.c \
	%reldir%/cache.c %reldir%/cache.h \
	%reldir%/prefetch.c %reldir%/prefetch.h \
	%reldir%/readahead.c %reldir%/readahead.h \
	%reldir%/wnodes.c %reldir%/wnodes.h \
	%reldir%/fs_files.c
## exec, jobs/ (the records and output store apart, FUSE-free), info, ctl.
libsandboxfs_a_SOURCES += \
	%reldir%/fs_jobs.c %reldir%/fs_jobs_i.h \
	%reldir%/fs_jobs_store.c \
	%reldir%/fs_info.c

bin_PROGRAMS += sandboxfs
sandboxfs_SOURCES = src/main.c
sandboxfs_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
sandboxfs_LDADD = libsandboxfs.a $(FUSE_LIBS) $(CURL_LIBS) $(CJSON_LIBS) \
	$(CRYPTO_LIBS) $(PTHREAD_LIBS) -lm
