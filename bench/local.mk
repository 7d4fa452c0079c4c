## bench
## The benchmark against sshfs and the native directory (bench/run), its
## small CI variant (bench/smoke, run by tests/integration/t-bench-smoke.sh)
## and the delay proxy they put in front of an agent or an sshd to add
## round-trip time. The proxy is built with the programs (noinst), so a
## plain `make` leaves everything bench/run needs.
noinst_PROGRAMS += %reldir%/delay-proxy
%canon_reldir%_delay_proxy_SOURCES = %reldir%/delay-proxy.c
%canon_reldir%_delay_proxy_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%canon_reldir%_delay_proxy_LDADD = $(PTHREAD_LIBS)
EXTRA_DIST += %reldir%/run %reldir%/smoke %reldir%/README.md
EXTRA_DIST += %reldir%/agent-bench
