/* SPDX-License-Identifier: MIT */
/*
 * agent_client: typed agent operations over the transport core: v1 files,
 * the exec stream, jobs, and the file extension. It builds request bodies
 * and paths (with the proto module), sends them through transport_send with
 * the right operation name and class (doc/transport-rules.md 8: reads are
 * safe to repeat; writes, every metadata change and job cancels are
 * changes; exec and job start are commands), and decodes the answers into
 * plain structs. It does not decide the transport (callers use
 * transport_session_kind first) and knows nothing about FUSE.
 *
 * The extension's file changes (ac_write_range, ac_ext_op) name this client
 * to the agent when the transport has a name (transport_set_client_id),
 * so that the change events they cause say so (ac_events).
 *
 * Every function returns 0 or a negative errno with err filled (see
 * sbx_error.h). Paths are relative to the session root ("" is the root for
 * the extension). Thread-safe, as the transport is.
 */
#ifndef SBFS_AGENT_CLIENT_H
#define SBFS_AGENT_CLIENT_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_files.h"
#include "client/sbx_error.h"
#include "client/transport.h"

/* ---- v1 ---------------------------------------------------------------- */

int ac_health(struct transport *t, const char *id, struct proto_health *h,
	      struct sbx_error *err) __attribute__((warn_unused_result));

/* GET /v1/files: the whole file appended to out (bounded by out->max and
 * the protocol's 32 MiB). */
int ac_read_file(struct transport *t, const char *id, const char *path,
		 struct buf *out, struct sbx_error *err)
	__attribute__((warn_unused_result));
/* PUT /v1/files: the whole file (parents created by the agent). */
int ac_write_file(struct transport *t, const char *id, const char *path,
		  const void *data, size_t len, struct sbx_error *err)
	__attribute__((warn_unused_result));
/* POST /v1/mkdir (mkdir -p). */
int ac_mkdir_p(struct transport *t, const char *id, const char *path,
	       struct sbx_error *err) __attribute__((warn_unused_result));

/* ---- commands ---------------------------------------------------------- */

/* Called for each stdout/stderr frame of a running command, in order.
 * Return 0, or a negative errno to stop (the command is then abandoned:
 * the agent kills it when the connection closes). */
typedef int ac_frame_fn(void *arg, const struct proto_frame *f);

struct ac_exit {
	bool exited; /* an exit frame came: code/truncated are set */
	int32_t code;
	bool truncated;
};

/*
 * POST /v1/exec: run a command and stream its frames to cb. Returns 0 when
 * the terminal frame was an exit frame (in *exit). An error frame is
 * SBX_COMMAND_FAILED with failure = the frame's code. A stream that breaks
 * or ends without a terminal frame, or none within timeoutMs + 60 s, is
 * SBX_OUTCOME_UNKNOWN: the command may have run, and it is never sent
 * again unknowingly (an agent with a reply cache may be asked once more
 * under the same key, when nothing of the stream arrived). The exchange
 * is bounded by timeoutMs + 60 s, not by the caller's operation deadline
 * (doc/transport-rules.md 9).
 */
int ac_exec(struct transport *t, const char *id,
	    const struct proto_exec_req *req, ac_frame_fn *cb, void *arg,
	    struct ac_exit *exit, struct sbx_error *err)
	__attribute__((warn_unused_result));

/* POST /v1/jobs/start. An answer without a readable jobId is
 * SBX_OUTCOME_UNKNOWN. */
int ac_job_start(struct transport *t, const char *id,
		 const struct proto_exec_req *req,
		 char job_id[PROTO_JOB_ID_MAX + 1], struct sbx_error *err)
	__attribute__((warn_unused_result));
/*
 * POST /v1/jobs/poll, with the answer's frames handed to fn one at a
 * time, in order, as they are decoded (proto_job_poll_decode_each): no
 * more than one frame is held decoded. wait_ms > 0 asks an extension agent
 * to hold the answer (long-poll); it must stay well below the response
 * deadline, which bounds the whole exchange. *out (no frames) is filled
 * when every frame was taken. fn returning < 0 stops: that value is
 * returned and err is left clear (SBX_OK). An answer that cannot be
 * decoded is retryable (SBX_UNREACHABLE); the frames before the fault
 * were delivered.
 */
int ac_job_poll_each(struct transport *t, const char *id,
		     const struct proto_job_poll_req *req, ac_frame_fn *fn,
		     void *arg, struct proto_job_poll *out,
		     struct sbx_error *err) __attribute__((warn_unused_result));
/* GET /sandboxfs/v1/jobs (the extension's job listing). */
int ac_job_list(struct transport *t, const char *id, struct proto_job_list *out,
		struct sbx_error *err) __attribute__((warn_unused_result));
int ac_job_cancel(struct transport *t, const char *id, const char *job_id,
		  struct sbx_error *err) __attribute__((warn_unused_result));

/* ---- the file extension -------------------------------------------------- */

int ac_stat(struct transport *t, const char *id, const char *path,
	    struct proto_attr *attr, char **target, struct sbx_error *err)
	__attribute__((warn_unused_result));
/* One page; cursor NULL for the first. */
int ac_list(struct transport *t, const char *id, const char *path,
	    const char *cursor, unsigned limit, struct proto_list *out,
	    struct sbx_error *err) __attribute__((warn_unused_result));

/* The small files of a directory with their contents (GET contents,
 * extension version 4): fn gets each one's name, attributes and bytes, in
 * the agent's order; a negative return from fn stops and is returned.
 * max_file and max_bytes bound the answer (0: the agent's defaults). */
typedef int (*ac_contents_fn)(void *ud, const char *name,
			      const struct proto_attr *a, const void *data,
			      size_t len);
int ac_contents(struct transport *t, const char *id, const char *dir,
		size_t max_file, size_t max_bytes, ac_contents_fn fn, void *ud,
		struct sbx_error *err) __attribute__((warn_unused_result));

/* A subtree in one answer (GET tree): max_entries bounds it (0: the
 * agent's default). */
int ac_tree(struct transport *t, const char *id, const char *path,
	    unsigned max_entries, struct proto_tree *out, struct sbx_error *err)
	__attribute__((warn_unused_result));

/*
 * Read up to len bytes at off into dst. if_match (may be NULL) makes the
 * agent refuse (ESTALE) when the file's validator changed. *got receives
 * the byte count (short at end of file); etag (PROTO_ETAG_MAX, may be NULL)
 * the file's validator; *size (may be NULL) its full size.
 */
int ac_read_range(struct transport *t, const char *id, const char *path,
		  uint64_t off, size_t len, const char *if_match, void *dst,
		  size_t *got, char *etag, uint64_t *size,
		  struct sbx_error *err) __attribute__((warn_unused_result));
/* A write that creates its file (extension version 3). */
struct ac_create {
	uint32_t mode; /* permission bits the new file gets, at most 07777 */
	bool exclusive; /* EEXIST when anything is at the path */
};

/* Write len bytes at off (UINT64_MAX: at the end of the file, as O_APPEND
 * does); mk (may be NULL) creates the file first, so that a new file costs
 * one request; times (may be NULL: atime, mtime) are set after the bytes,
 * in the same request; attr (may be NULL) receives the attributes after
 * the write. A change: it never reaches the agent twice unknowingly (an
 * append sent twice would write twice). */
int ac_write_range(struct transport *t, const char *id, const char *path,
		   uint64_t off, const void *data, size_t len,
		   const struct ac_create *mk, const struct proto_time *times,
		   struct proto_attr *attr, struct sbx_error *err)
	__attribute__((warn_unused_result));

/* The metadata operations: op is the extension's route name ("create",
 * "mkdir", "unlink", "rmdir", "rename", "link", "symlink", "chmod",
 * "truncate", "utimens", "fsync"); attr (may be NULL) receives the answer's
 * attributes for the routes that return them. */
int ac_ext_op(struct transport *t, const char *id, const char *op,
	      const struct proto_ext_req *req, struct proto_attr *attr,
	      struct sbx_error *err) __attribute__((warn_unused_result));

int ac_readlink(struct transport *t, const char *id, const char *path,
		char **target, struct sbx_error *err)
	__attribute__((warn_unused_result));
int ac_statfs(struct transport *t, const char *id, struct proto_statfs *out,
	      struct sbx_error *err) __attribute__((warn_unused_result));

/* ---- change events (extensions.events 1) -------------------------------- */

/* since for ac_events: where now is. */
#define AC_EVENTS_NOW UINT64_MAX

/*
 * GET events (doc/protocol-ext.md, "Change events"): the changes made in
 * the sandbox's files after since, in order, held by the agent until
 * there is one or wait_ms passes (0: the answer comes at once). Paths in
 * out are relative, as every path here. Pass out->next as the next since.
 * Only for an agent whose health advertised extensions.events (another
 * answers an untyped 404, which the transport takes for a stale route).
 *
 * - since AC_EVENTS_NOW asks where now is: out->next and no events;
 *   every change made after the call returned is reported from there.
 * - boot_id: the bootId of the answer since came from (NULL or "": none
 *   yet). An answer from another boot (the agent restarted) has its
 *   events dropped, they are not the ones after since, and is reported
 *   as lost.
 * - out->lost: events were lost (the agent's ring moved past since, its
 *   watcher lost track, the agent restarted): forget everything cached
 *   about the sandbox, go on from out->next.
 * - out->unavailable not "": the agent cannot give events (out->lost is
 *   set too); asking again brings the same until the agent restarts, so
 *   a client falls back to timeouts (and may look at health again when
 *   transport_generation changes).
 * - An event whose by equals the transport's client name was caused by
 *   this client's own change (transport_set_client_id); others' are not.
 *
 * Class TRANSPORT_SAFE: it only looks. The agent sends nothing until it
 * answers, and answer headers must come within the transport's response
 * deadline, so wait_ms is cut to PROTO_EXT_EVENTS_MAX_WAIT_MS and to that
 * deadline less the larger of 1 s and a quarter of it (60 s: 30 s; 5 s:
 * 3.75 s; 1 s or less: 0). Call it from a thread without an operation
 * deadline, or with one past the wait. An answer that cannot be decoded
 * is SBX_UNREACHABLE (-EIO): retryable.
 */
int ac_events(struct transport *t, const char *id, const char *boot_id,
	      uint64_t since, long wait_ms, struct proto_events *out,
	      struct sbx_error *err) __attribute__((warn_unused_result));

#endif
