## sandbox-agent: libmicrohttpd, cJSON and OpenSSL only (never FUSE or curl).
## The agent layer sees src/common only.
sbin_PROGRAMS += sandbox-agent
noinst_LIBRARIES += libsbfs_agent.a
libsbfs_agent_a_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_AGENT)
libsbfs_agent_a_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PTHREAD_CFLAGS)
libsbfs_agent_a_SOURCES = \
	%reldir%/agent.h %reldir%/routes.c %reldir%/routes.h \
	%reldir%/http.c %reldir%/http.h %reldir%/http_i.h \
	%reldir%/http_access.c %reldir%/http_reply.c %reldir%/http_cache.c \
	%reldir%/health.c \
	%reldir%/options.c %reldir%/options.h \
	%reldir%/resolve.c %reldir%/resolve.h \
	%reldir%/files.c \
	%reldir%/fsops.c %reldir%/fsops.h \
	%reldir%/ext.c %reldir%/ext_i.h %reldir%/ext_io.c %reldir%/ext_meta.c \
	%reldir%/exec.c \
	%reldir%/jobs.c %reldir%/jobs.h %reldir%/jobs_i.h \
	%reldir%/jobs_run.c %reldir%/jobs_routes.c \
	%reldir%/watch.c %reldir%/watch.h %reldir%/watch_i.h \
	%reldir%/watch_thread.c %reldir%/watch_tree.c %reldir%/watch_tree.h \
	%reldir%/outlog.c %reldir%/outlog.h \
	%reldir%/spawn.c %reldir%/spawn.h %reldir%/spawn_i.h \
	%reldir%/spawn_cmd.c %reldir%/spawn_run.c \
	%reldir%/confine.c %reldir%/confine.h \
	%reldir%/zygote.c %reldir%/zygote.h %reldir%/zygote_i.h \
	%reldir%/zygote_main.c %reldir%/zygote_wire.c \
	%reldir%/proc.c %reldir%/proc.h
sandbox_agent_SOURCES = %reldir%/main.c
sandbox_agent_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_AGENT)
sandbox_agent_CFLAGS = $(AM_CFLAGS) $(MHD_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PTHREAD_CFLAGS)
sandbox_agent_LDADD = $(LIB_AGENT) $(MHD_LIBS) $(CJSON_LIBS) \
	$(CRYPTO_LIBS) $(PTHREAD_LIBS) -lm
