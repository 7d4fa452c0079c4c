/* SPDX-License-Identifier: MIT */
/*
 * provider_local: the local provider (sandboxctl(1), man/sandboxctl.1),
 * sandboxfs's embedded
 * default. Its sandboxes are the records under a state directory
 * (local_state.h); resume and stop run the same lifecycle as sandboxctl
 * (local_ctl.h). Records are re-read on every call, but parsed again only
 * when sandbox.json was replaced (its inode, size or mtime changed), so the
 * per-operation record read costs one stat(2).
 *
 * Native sessions (records without the transport label) are read directly
 * under root/, confined to it (no symlink in any component, no ".."), and
 * run commands with /bin/sh -c in root/ as the sandbox's exec user, with a
 * deadline and bounded output.
 *
 * Thread-safe.
 */
#ifndef SBFS_PROVIDER_LOCAL_H
#define SBFS_PROVIDER_LOCAL_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include "client/provider.h"

/* Native exec bounds. */
#define PROVIDER_LOCAL_EXEC_TIMEOUT_MS 60000L
#define PROVIDER_LOCAL_EXEC_OUTPUT_MAX (4UL * 1024 * 1024)

/*
 * Open the local provider on a state directory (NULL: $SANDBOXFS_STATE_DIR,
 * else the default of sandboxctl(1)). The directory must exist and be
 * readable: an unusable one is -ENOENT/-EACCES/-ENOTDIR with err saying
 * which directory and why.
 */
int provider_local_new(const char *state_dir, struct provider **out,
		       struct sbx_error *err)
	__attribute__((warn_unused_result));

#endif
