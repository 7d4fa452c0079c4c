## sandboxctl: the local provider's control tool. A thin main over
## libsandboxfs.a; it pulls in no FUSE, libcurl or libmicrohttpd code.
bin_PROGRAMS += sandboxctl
sandboxctl_SOURCES = %reldir%/main.c
sandboxctl_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PTHREAD_CFLAGS)
sandboxctl_LDADD = libsandboxfs.a $(CJSON_LIBS) $(CRYPTO_LIBS) \
	$(PTHREAD_LIBS) -lm
