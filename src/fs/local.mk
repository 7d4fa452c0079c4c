## sandboxfs: the FUSE layer (libfuse 3 low-level API). It sees src/client
## and src/common.
noinst_LIBRARIES += libsbfs_fs.a
libsbfs_fs_a_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_FS)
libsbfs_fs_a_CFLAGS = $(AM_CFLAGS) $(FUSE_CFLAGS) $(PTHREAD_CFLAGS)
libsbfs_fs_a_SOURCES = \
	%reldir%/fs_i.h
## files/ through protocol v1 only (strict agents) and native sessions.
libsbfs_fs_a_SOURCES += \
	%reldir%/fs_files_v1.c %reldir%/fs_files_v1_i.h \
	%reldir%/fs_files_v1_text.c \
	%reldir%/fs_files_v1_cmd.c %reldir%/fs_files_v1_cmd.h \
	%reldir%/fs_files_v1_open.c %reldir%/fs_files_v1_open.h
libsbfs_fs_a_SOURCES += \
	%reldir%/ll.c %reldir%/ll_files.c %reldir%/ll_dirs.c %reldir%/ll_i.h \
	%reldir%/dirsnap.c %reldir%/dirsnap.h \
	%reldir%/inodes.c %reldir%/inodes.h \
	%reldir%/fs.c %reldir%/fs.h %reldir%/events.c \
	%reldir%/opts.c %reldir%/tune.c \
	%reldir%/sandbox.c \
	%reldir%/cache.c %reldir%/cache.h \
	%reldir%/prefetch.c %reldir%/prefetch.h \
	%reldir%/readahead.c %reldir%/readahead.h \
	%reldir%/wnodes.c %reldir%/wnodes.h \
	%reldir%/fs_files.c %reldir%/fs_files_i.h \
	%reldir%/fs_files_read.c %reldir%/fs_files_write.c \
	%reldir%/fs_files_list.c
## exec, jobs/ (the records and output store apart, FUSE-free), info, ctl.
libsbfs_fs_a_SOURCES += \
	%reldir%/fs_jobs.c %reldir%/fs_jobs_i.h %reldir%/fs_jobs_run.h \
	%reldir%/fs_jobs_poll.c %reldir%/fs_exec.c \
	%reldir%/fs_jobs_store.c \
	%reldir%/fs_info.c

bin_PROGRAMS += sandboxfs
sandboxfs_SOURCES = %reldir%/main.c
sandboxfs_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_FS)
sandboxfs_CFLAGS = $(AM_CFLAGS) $(FUSE_CFLAGS) $(PTHREAD_CFLAGS)
sandboxfs_LDADD = $(LIB_FS) $(FUSE_LIBS) $(CURL_LIBS) $(CJSON_LIBS) \
	$(CRYPTO_LIBS) $(PTHREAD_LIBS) -lm
