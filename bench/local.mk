## bench
## The benchmark against sshfs and the native directory (bench/run), its
## small CI variant (bench/smoke, run by tests/integration/t-bench-smoke.sh),
## the daemon's peak memory in four cases (bench/memory),
## the delay proxy they put in front of an agent or an sshd to add
## round-trip time, and the probe of the visibility rows (how long a change
## takes to show through a mount). Both are built with the programs
## (noinst), so a plain `make` leaves everything bench/run needs.
noinst_PROGRAMS += %reldir%/delay-proxy
%canon_reldir%_delay_proxy_SOURCES = %reldir%/delay-proxy.c
%canon_reldir%_delay_proxy_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%canon_reldir%_delay_proxy_LDADD = $(PTHREAD_LIBS)
noinst_PROGRAMS += %reldir%/vis-probe
%canon_reldir%_vis_probe_SOURCES = %reldir%/vis-probe.c
EXTRA_DIST += %reldir%/run %reldir%/smoke %reldir%/memory %reldir%/README.md
EXTRA_DIST += %reldir%/agent-bench

## transport-bench: requests per second through the transport core, next
## to plain curl (bench/transport-bench runs both).
noinst_PROGRAMS += %reldir%/transport-bench
%canon_reldir%_transport_bench_SOURCES = %reldir%/transport-bench.c
%canon_reldir%_transport_bench_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_CLIENT)
%canon_reldir%_transport_bench_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
%canon_reldir%_transport_bench_LDADD = $(LIB_CLIENT) $(CURL_LIBS) \
	$(CJSON_LIBS) $(CRYPTO_LIBS) $(PTHREAD_LIBS) -lm
EXTRA_DIST += %reldir%/transport-bench
