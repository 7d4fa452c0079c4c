## tests: exec and jobs/ of the mount, their FUSE-free parts: command
## parsing (check_fs_jobs_cmd.c); status lines, the output store and the
## job table (check_fs_jobs.c).
check_sandboxfs_SOURCES += %reldir%/check_fs_jobs_cmd.c %reldir%/check_fs_jobs.c
## What the suites of src/fs that need a sandbox share: a mount's state
## without FUSE (tests/fs_helpers.[ch]).
check_sandboxfs_SOURCES += %reldir%/fs_helpers.c %reldir%/fs_helpers.h
## files/ without the file extension (fs_files_v1.c): the find record
## parser, the errno table, native quoting and the per-open buffer; then
## the operations against a strict v1 agent and native sessions.
check_sandboxfs_SOURCES += %reldir%/check_fs_v1.c %reldir%/check_fs_v1_ops.c
## The mount's cache on its own: directory listings, attributes and
## content validators (put, lookup, expiry, forgetting, bounds).
check_sandboxfs_SOURCES += %reldir%/check_fs_cache.c
## The readahead window on its own (src/fs/readahead.c): exact reads
## against a simulated file whose fetches are slow, fail or go stale.
check_sandboxfs_SOURCES += %reldir%/check_fs_readahead.c
## The mount's write table on its own (src/fs/wnodes.c): nodes, renames,
## losses and the gathering window's flusher.
check_sandboxfs_SOURCES += %reldir%/check_fs_wnodes.c
## The mount's table of FUSE node ids (src/fs/inodes.c): paths, lookups
## and forgets, renames, detached and hidden nodes.
check_sandboxfs_SOURCES += %reldir%/check_fs_inodes.c
## The listings readers are part way through (src/fs/dirsnap.c): offsets,
## a reader's own snapshot, the end of a listing, the bounds.
check_sandboxfs_SOURCES += %reldir%/check_fs_dirsnap.c
## The prefetched contents of walked directories (src/fs/prefetch.c)
## against a real agent: when a directory is fetched, bodies served once
## and only while the mount holds their version.
check_sandboxfs_SOURCES += %reldir%/check_fs_prefetch.c
