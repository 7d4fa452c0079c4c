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
SBFS_MOUNT_TESTS = \
	%reldir%/t-syscalls.sh
TESTS += $(SBFS_MOUNT_TESTS)
EXTRA_DIST += %reldir%/lib.sh $(SBFS_MOUNT_TESTS)
