## sandboxctl: the local provider's control tool, over the client layer. It
## pulls in no FUSE or libmicrohttpd code; exec and jobs talk to agents
## through the transport core, the only libcurl user.
bin_PROGRAMS += sandboxctl
sandboxctl_SOURCES = %reldir%/main.c %reldir%/ctl.h %reldir%/exec.c \
	%reldir%/jobs.c %reldir%/session.c %reldir%/create_watch.c
sandboxctl_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_CTL)
sandboxctl_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
sandboxctl_LDADD = $(LIB_CLIENT) $(CURL_LIBS) $(CJSON_LIBS) $(CRYPTO_LIBS) \
	$(PTHREAD_LIBS) -lm
