## tests: the Azure provider against a fake Azure (a TLS data plane and
## token endpoint, and a TLS proxy in front of plain agents, with a test CA
## and pinned name resolution), and the seed's scenarios through it.
check_sandboxfs_SOURCES += \
	%reldir%/azure_fake.c %reldir%/azure_fake.h %reldir%/azure_fake_i.h \
	%reldir%/azure_fake_http.c %reldir%/azure_fake_proxy.c \
	%reldir%/azure_helpers.c %reldir%/azure_helpers.h \
	%reldir%/check_azure.c %reldir%/check_azure_dp.c \
	%reldir%/check_azure_auth.c %reldir%/check_azure_agents.c \
	%reldir%/azure_seed_shim.c \
	%reldir%/azure_seed_shim.h %reldir%/check_azure_seed.c \
	%reldir%/check_azure_seed_bodies.c
check_sandboxfs_CFLAGS += $(SSL_CFLAGS)
check_sandboxfs_LDADD += $(SSL_LIBS)

## azure-fake: the fake Azure as a program, in front of real agents, for
## tests/integration/t-azure.sh.
check_PROGRAMS += %reldir%/azure-fake
%canon_reldir%_azure_fake_SOURCES = %reldir%/azure_fake_main.c \
	%reldir%/azure_fake.c %reldir%/azure_fake.h %reldir%/azure_fake_i.h \
	%reldir%/azure_fake_http.c %reldir%/azure_fake_proxy.c \
	%reldir%/sys_helpers.c %reldir%/sys_helpers.h
%canon_reldir%_azure_fake_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_CLIENT)
%canon_reldir%_azure_fake_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS) $(SSL_CFLAGS)
%canon_reldir%_azure_fake_LDADD = $(LIB_CLIENT) $(MHD_LIBS) $(SSL_LIBS) \
	$(CRYPTO_LIBS) $(CJSON_LIBS) $(CURL_LIBS) $(PTHREAD_LIBS) -lm
