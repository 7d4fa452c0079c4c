## tests/integration
## Shell scenarios, one per t-*.sh file: exit 0 pass, 1 fail, 77 skip (with
## the reason printed), 99 hard error. The extension and its log compiler
## are defined once, here, for every t-*.sh.
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)

TESTS += %reldir%/t-sandboxctl.sh
EXTRA_DIST += %reldir%/t-sandboxctl.sh

## The real-mount scenarios (lib.sh holds their verbs) and the POSIX
## semantics driver they run on both sides of a mount.
check_PROGRAMS += %reldir%/syscalls
%canon_reldir%_syscalls_SOURCES = %reldir%/syscalls.c
%canon_reldir%_syscalls_CFLAGS = $(AM_CFLAGS)
## The random differential tester (fsx.c says how to run and replay it).
check_PROGRAMS += %reldir%/fsx
%canon_reldir%_fsx_SOURCES = %reldir%/fsx.c %reldir%/fsx_i.h \
	%reldir%/fsx_options.c %reldir%/fsx_rng.c %reldir%/fsx_check.c \
	%reldir%/fsx_ops.c %reldir%/fsx_outside.c %reldir%/fsx_minimize.c \
	tests/sys_helpers.c tests/sys_helpers.h
%canon_reldir%_fsx_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%canon_reldir%_fsx_LDADD = $(PTHREAD_LIBS)
## The attacks of the confinement tests (t-confine-*.sh).
check_PROGRAMS += %reldir%/confine-probe
%canon_reldir%_confine_probe_SOURCES = %reldir%/confine-probe.c
%canon_reldir%_confine_probe_CFLAGS = $(AM_CFLAGS)
## A relay that makes an agent's answers trickle (t-deadline.sh).
check_PROGRAMS += %reldir%/trickle
%canon_reldir%_trickle_SOURCES = %reldir%/trickle.c
%canon_reldir%_trickle_CFLAGS = $(AM_CFLAGS)
%canon_reldir%_trickle_LDADD = $(PTHREAD_LIBS)
## The attacker's tools: a stand-in listener, slowloris and raw requests
## (t-agent-route.sh), and a library that swaps a name for a symlink at
## the worst moment for sandboxctl (t-rm-race.sh). The library is built
## without the sanitizers, as a plain shared object.
check_PROGRAMS += %reldir%/hostile
%canon_reldir%_hostile_SOURCES = %reldir%/hostile.c
%canon_reldir%_hostile_CFLAGS = $(AM_CFLAGS)
check_PROGRAMS += %reldir%/swapshim.so
%canon_reldir%_swapshim_so_SOURCES = %reldir%/swapshim.c
%canon_reldir%_swapshim_so_CFLAGS = -fPIC -std=gnu11 -Wall -Wextra
%canon_reldir%_swapshim_so_LDFLAGS = -shared
%canon_reldir%_swapshim_so_LDADD = -ldl
SBFS_MOUNT_TESTS = \
	%reldir%/t-files.sh \
	%reldir%/t-syscalls.sh \
	%reldir%/t-reads.sh \
	%reldir%/t-write-errors.sh \
	%reldir%/t-share.sh \
	%reldir%/t-fsx.sh \
	%reldir%/t-create.sh \
	%reldir%/t-names.sh \
	%reldir%/t-events.sh \
	%reldir%/t-warm.sh \
	%reldir%/t-prefetch.sh \
	%reldir%/t-tree.sh \
	%reldir%/t-errors.sh \
	%reldir%/t-strict-v1.sh \
	%reldir%/t-strict-v1-walk.sh \
	%reldir%/t-jobs.sh \
	%reldir%/t-jobs-stream.sh \
	%reldir%/t-jobs-output.sh \
	%reldir%/t-jobs-sandbox.sh \
	%reldir%/t-lifecycle.sh \
	%reldir%/t-deadline.sh \
	%reldir%/t-resume.sh \
	%reldir%/t-dead-agent.sh \
	%reldir%/t-owner-only.sh \
	%reldir%/t-agent-route.sh \
	%reldir%/t-rm-race.sh \
	%reldir%/t-multi.sh \
	%reldir%/t-native.sh \
	%reldir%/t-confine-identity.sh \
	%reldir%/t-confine-native.sh \
	%reldir%/t-confine-lifetime.sh \
	%reldir%/t-confine-limits.sh \
	%reldir%/t-confine-network.sh \
	%reldir%/t-confine-statedir.sh \
	%reldir%/t-mount.sh \
	%reldir%/t-memory.sh \
	%reldir%/t-example-backup.sh \
	%reldir%/t-example-sync.sh \
	%reldir%/t-example-grep.sh
TESTS += $(SBFS_MOUNT_TESTS)
EXTRA_DIST += %reldir%/lib.sh $(SBFS_MOUNT_TESTS)

## sandboxctl exec, jobs and create's interruption, with lib.sh's verbs
## but no mount. After the mount tests: its 200 MB stream loads both
## cores for seconds, and t-files.sh's atomic-rename check fails now and
## then under such load.
TESTS += %reldir%/t-ctl-exec.sh
EXTRA_DIST += %reldir%/t-ctl-exec.sh

## The benchmark's small variant (bench/smoke): every row gets a number.
TESTS += %reldir%/t-bench-smoke.sh
EXTRA_DIST += %reldir%/t-bench-smoke.sh

## The Azure provider through a full mount against the fake Azure
## (tests/azure-fake).
TESTS += %reldir%/t-azure.sh
EXTRA_DIST += %reldir%/t-azure.sh
