## Unit suites (Check): one runner, one suite per area (suites.def).
if HAVE_CHECK
check_PROGRAMS += check_sandboxfs
TESTS += check_sandboxfs
endif
check_sandboxfs_SOURCES = %reldir%/check_main.c %reldir%/check_suites.h \
	%reldir%/suites.def %reldir%/helpers.c %reldir%/helpers.h \
	%reldir%/sys_helpers.c %reldir%/sys_helpers.h \
	%reldir%/tcase_table.c %reldir%/tcase_table.h \
	%reldir%/check_common.c %reldir%/check_e2e.c
check_sandboxfs_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_ALL)
check_sandboxfs_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS) $(CHECK_CFLAGS)
check_sandboxfs_LDADD = libsbfs_fs.a libsbfs_agent.a $(LIB_CLIENT) \
	$(FUSE_LIBS) $(CURL_LIBS) \
	$(CJSON_LIBS) $(CRYPTO_LIBS) $(MHD_LIBS) $(CHECK_LIBS) $(PTHREAD_LIBS) -lm

## Paths the suites and scripts find the built programs by.
## The tree's own rules: layers, where each library is included, forbidden
## functions, formatting.
TESTS += %reldir%/check_source.sh
EXTRA_DIST += %reldir%/check_source.sh

AM_TESTS_ENVIRONMENT = \
	SBFS_BUILDDIR='$(abs_top_builddir)'; export SBFS_BUILDDIR; \
	SBFS_SRCDIR='$(abs_top_srcdir)'; export SBFS_SRCDIR; \
	SBFS_AGENT='$(abs_top_builddir)/sandbox-agent'; export SBFS_AGENT; \
	SBFS_CTL='$(abs_top_builddir)/sandboxctl'; export SBFS_CTL; \
	SBFS_MOUNT='$(abs_top_builddir)/sandboxfs'; export SBFS_MOUNT; \
	CK_DEFAULT_TIMEOUT=60; export CK_DEFAULT_TIMEOUT;

include %reldir%/agent.mk
include %reldir%/exec.mk
include %reldir%/transport.mk
include %reldir%/ctl.mk
include %reldir%/fs.mk
include %reldir%/azure.mk
