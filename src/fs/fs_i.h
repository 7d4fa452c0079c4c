/* SPDX-License-Identifier: MIT */
/*
 * fs_i: what the modules of the FUSE layer share (SEMANTICS.md).
 *
 *   ll.c          the FUSE low-level operations: node ids (inodes.c),
 *                 kernel invalidation; open files (ll_files.c);
 *                 directories without handles (ll_dirs.c, dirsnap.c)
 *   fs.c          the path operations: parses a path into a node and
 *                 dispatches to the subtree that owns it
 *   sandbox.c     the mount and its sandboxes: listing, the per-operation
 *                 record read and transport decision, auto-resume, the
 *                 agent's health (extension advertised or not), errors
 *   cache.c       attribute cache for files/ (bounded, timed)
 *   fs_files.c    files/ through the agent's file extension: helpers and
 *                 metadata; its reads (fs_files_read.c), writes
 *                 (fs_files_write.c), listings (fs_files_list.c)
 *   fs_files_v1.c files/ through protocol v1 only (strict agents) and
 *                 through the provider's native routes (legacy sessions):
 *                 listings and metadata; its commands (fs_files_v1_cmd.c),
 *                 open files (fs_files_v1_open.c), text (fs_files_v1_text.c)
 *   fs_jobs.c     jobs/ and the job files; exec (fs_exec.c), the job
 *                 pollers (fs_jobs_poll.c), the records (fs_jobs_store.c)
 *   fs_info.c     info and ctl
 *
 * Nothing below this layer knows about FUSE. Every operation returns 0 (or
 * a byte count) or a negative errno, as libfuse expects.
 *
 * Thread-safety: libfuse calls ll.c from many threads. struct sbfs is shared;
 * its mutable parts are guarded by sbfs.lock. A struct sbx is reference
 * counted (sbfs_enter/sbfs_leave) and guards its own mutable fields with
 * sbx.lock.
 */
#ifndef SBFS_FS_I_H
#define SBFS_FS_I_H

#ifndef SBFS_SEE_FS
#error "src/fs/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <fuse.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "common/dlist.h"
#include "common/proto.h"
#include "common/proto_files.h"
#include "client/provider.h"
#include "client/sbx_error.h"
#include "client/transport.h"

struct cache;
struct sbx_events;
struct fs_jobs;

/* Mount options (sandboxfs(1)); filled by main.c, read-only afterwards. */
struct sbfs_opts {
	struct provider_opts prov; /* which provider, and its settings */
	char *log_file; /* -o log=FILE, or NULL */
	long timeout_s; /* an agent's answer (response deadline), 60 */
	long connect_timeout_s; /* 10 */
	double attr_timeout; /* seconds, for files/ attributes */
	double entry_timeout;
	double negative_timeout;
	double cache_timeout; /* the same three with change events, 300 */
	bool noevents; /* never follow change events */
	long job_timeout_s; /* a job's timeoutMs when the command sets
				    none, default 86400 */
	long list_cache_ms; /* how long the provider's list is reused */
	long write_window_ms; /* longest a written byte waits unsent, 1000;
				 0 sends each write at once */
	bool noautoresume; /* do not resume a stopped sandbox */
	bool raw_symlinks; /* show a link leading out as stored */
	bool shared_exec; /* exec and ctl files writable by all users */
	bool has_fsname; /* the user named the mount's source */
	bool ro; /* refuse every change with EROFS */
	bool foreground;
	bool debug;
};

/* One sandbox as this mount sees it. */
struct sbx {
	struct sbfs *fs;
	char id[PROVIDER_ID_MAX + 1];
	unsigned refs; /* guarded by fs->lock */
	pthread_mutex_t lock; /* guards the fields below */
	enum transport_kind kind; /* from the last record read */
	bool health_known; /* health below is from the current boot */
	unsigned health_gen; /* transport_generation() when read */
	struct proto_health health;
	bool ext; /* the file extension is advertised */
	bool ext_tree; /* ... at version 2: GET tree */
	bool ext_create_write; /* ... at version 3: a write creates */
	bool ext_contents; /* ... at version 4: GET contents */
	uint64_t ext_max_write; /* the agent's largest extension write */
	/* The caller whose last operation here ended at a deadline, and
	 * when (sandbox.c: its next request within SBFS_FAIL_FAST_MS fails
	 * at once). */
	pid_t late_pid;
	long long late_ms;
	/* Without the file extension (fs_files_v1_cmd.c): the directory of
	 * the last attribute miss (a hash of its path), and when a miss
	 * last listed it (monotonic ms, 0 when none did). */
	uint64_t v1_miss_dir;
	long long v1_miss_listed_ms;
	struct fs_jobs *jobs; /* fs_jobs.c's state, created lazily */
	struct sbx_events *events; /* events.c's, set once when followed */
	/* The last error worth a warning, for info's lastError. */
	bool has_last_error;
	struct timespec last_error_at; /* CLOCK_REALTIME */
	char last_error_op[32];
	char last_error[1024];
	struct sbx *next; /* fs->sandboxes, guarded by fs->lock */
};

/* The mount. */
struct sbfs {
	struct sbfs_opts o;
	struct provider *prov;
	struct transport *t;
	uid_t uid; /* owner of the synthetic entries */
	gid_t gid;
	struct timespec start; /* times of the synthetic entries */
	pthread_mutex_t lock;
	struct sbx *sandboxes;
	char **ids; /* the provider's last list */
	size_t nids;
	long long ids_ms; /* when it was read (monotonic ms) */
	struct cache *cache;
	struct readahead *ra; /* sequential readers' windows */
	struct wnodes *writes; /* files being written (wnodes.h) */
	struct prefetch *pf; /* walked directories read ahead */
	struct inodes *inodes; /* the kernel's node ids (ll.c) */
	struct dirsnaps *dirs; /* listings readers are part way through */
	pthread_mutex_t hide_lock; /* open files losing their name (ll.c) */
	/* The files open through protocol v1 (fs_files_v1_open.c), and the
	 * lock of that list and of their reference counts and paths. */
	pthread_mutex_t v1_lock;
	struct dlist v1_open;
	/* Name changes in flight (ll.c, ll_moved_again): how many, and a
	 * generation bumped as each begins and ends (under names_lock, with
	 * atomic stores, so that ll_moved_init reads it without the lock). */
	pthread_mutex_t names_lock;
	pthread_cond_t names_idle;
	unsigned names_busy;
	uint64_t names_gen;
	/* This mount's name to agents: their change events say which
	 * changes were its own (events.c). */
	char client_id[PROTO_CLIENT_ID_MAX + 1];
	struct fuse_session *se; /* set when the mount starts (ll.c) */
	char *spool_dir; /* where large job output spills */
};

/* The readahead pool of a mount: its workers and the chunk memory all its
 * readers share (SEMANTICS.md, memory). */
#define SBFS_RA_WORKERS 8
#define SBFS_RA_BUDGET (64UL * 1024 * 1024)
/* The directory listings kept for readers part way through them, apart
 * from those being answered: how many, and how many entries in all (about
 * 200 bytes each). */
#define SBFS_DIRSNAPS_MAX 64
#define SBFS_DIRSNAP_ENTRIES_MAX 131072

/* ---- the mount (sandbox.c) ----------------------------------------------- */

/* Make the mount's state from its options, serving the sandboxes of prov
 * (provider_open; a test's own): the transport, the caches. prov is the
 * mount's from now on, freed with it or on failure. err says what is
 * unusable. */
int sbfs_new(const struct sbfs_opts *o, struct provider *prov,
	     struct sbfs **out, struct sbx_error *err)
	__attribute__((warn_unused_result));
void sbfs_free(struct sbfs *fs);

/* The mount's source as mount(8) and df show it ("local:/var/lib/...").
 */
void sbfs_source(struct sbfs *fs, char *buf, size_t size);
/* The file system the sandboxes live on (df at the top of the mount); an
 * empty one when the provider cannot tell. */
int sbfs_home_statfs(struct sbfs *fs, struct statvfs *st);

/* The provider's sandbox ids (reused for o.list_cache_ms). Copies into
 * *ids (free with strv_free, common/strv.h). */
int sbfs_list(struct sbfs *fs, char ***ids, size_t *n)
	__attribute__((warn_unused_result));

/*
 * Enter sandbox id for one operation (op names it in errors and logs): read
 * the provider record and decide the transport (doc/transport-rules.md 1: one
 * record read per operation); resume it when it is stopped (unless
 * noautoresume: then -EHOSTDOWN); for agent sessions make sure the agent's
 * health of the current boot is known (want_health), which tells whether
 * the file extension is there. Returns a reference in *out, or a negative
 * errno (already logged): -ENOENT when the sandbox is gone or id is not a
 * valid name, -EPROTO for an unknown transport label, -EIO when the agent
 * cannot be reached before the deadline.
 */
int sbfs_enter(struct sbfs *fs, const char *id, const char *op,
	       bool want_health, struct sbx **out)
	__attribute__((warn_unused_result));
/* Look at sandbox id without resuming it or asking its agent anything:
 * one record read (-ENOENT when gone). For the sandbox's own directory and
 * its synthetic entries. Returns a reference like sbfs_enter. */
int sbfs_peek(struct sbfs *fs, const char *id, struct sbx **out)
	__attribute__((warn_unused_result));
/* The sandbox as the mount already knows it, without any request (for
 * releasing handles); NULL when never entered. A reference. */
struct sbx *sbfs_known(struct sbfs *fs, const char *id);
/* Give back sbfs_enter's reference. NULL-safe. When the operation ended
 * at a deadline (transport_op_timed_out), remember its caller: the same
 * caller's next sbfs_enter of this sandbox within SBFS_FAIL_FAST_MS fails
 * with EIO at once, so that the kernel's second request of one system call
 * (a lookup after a failed revalidation) does not wait a second deadline
 * (doc/transport-rules.md 9). Other callers are not affected. */
void sbfs_leave(struct sbx *sb);
#define SBFS_FAIL_FAST_MS 1000

/* The operation deadline of a FUSE operation (fs.c): the mount's timeout
 * from now when bounded, else none; clears the timed-out mark. */
void sbfs_op_begin(const struct sbfs *fs, bool bounded);

/*
 * Turn a failed operation's error into the errno to return, logging it
 * once with the sandbox, operation and path (never a credential). Expected
 * outcomes (ENOENT, EEXIST, ENOTEMPTY, ...) are logged at debug level only.
 */
int sbfs_fail(struct sbfs *fs, const char *id, const char *op, const char *path,
	      const struct sbx_error *err);

/* Forget what the mount knows about a sandbox's agent (route, health):
 * the next operation fetches, activates and asks again. */
void sbfs_refresh(struct sbfs *fs, struct sbx *sb);

/* Attributes of a synthetic entry: a directory (mode 0555) or a file with
 * the given mode and size, owned by the mounting user. */
void sbfs_synth_stat(const struct sbfs *fs, struct stat *st, bool dir,
		     mode_t perm, off_t size);

/*
 * The FUSE request this thread serves (ll.c): its mount, its caller's pid
 * (0 when none), and whether the caller gave up waiting (a signal).
 * Outside a request: NULL, 0, false.
 */
struct sbfs *sbfs_current(void);
pid_t sbfs_caller_pid(void);
bool sbfs_interrupted(void);

/*
 * Make the kernel forget what it holds of files/<rel> in sandbox id, after
 * a change it did not see: SBFS_KERNEL_ATTR its attributes, _DATA its
 * pages, _NAME the name itself (the entry in its directory, and the
 * directory's attributes and listing). Never from a request that holds
 * the node or its directory (the kernel would wait for it). A no-op
 * before the mount serves.
 */
#define SBFS_KERNEL_ATTR 1u
#define SBFS_KERNEL_DATA 2u
#define SBFS_KERNEL_NAME 4u
/* The name appeared: a negative entry of it goes, and the directory's
 * attributes and listing; a file the kernel knows by that name keeps its
 * entry (and so its node and inode number: tar compares them). */
#define SBFS_KERNEL_NEW_NAME 8u
void sbfs_kernel_changed(struct sbfs *fs, const char *id, const char *rel,
			 unsigned what);
/* ... everything of sandbox id's files/. */
void sbfs_kernel_forget_sandbox(struct sbfs *fs, const char *id);

/*
 * The node table after a change made in the sandbox, not through the
 * mount (ll.c). sbfs_nodes_open_fino: the sandbox's inode number of the
 * file of files/<rel> when it is open through the mount (0: none open, or
 * not known), and the change time the mount last saw of it (*ctime_ns, 0:
 * unknown; inodes_set_fino). sbfs_nodes_vanish: that file no longer has the name (its
 * open files go stale, ESTALE, rather than reach a file that takes the
 * name later). sbfs_nodes_move: it is files/<to> now (its open files
 * follow it). The caller has asked the sandbox (a change told late may
 * be this mount's own, already applied).
 *
 * What the sandbox answered is true of the node table only if none of
 * this mount's own name changes ran meanwhile (one may be half done: the
 * sandbox changed, the table not yet). So: gen = sbfs_names_quiet()
 * before looking; then sbfs_names_hold(gen), which fails when a change of
 * the mount's own began since; vanish and move while holding it;
 * sbfs_names_release(); and sbfs_nodes_vanished(ino) for each node that
 * sbfs_nodes_vanish returned (its pages go, outside the hold).
 */
uint64_t sbfs_names_quiet(struct sbfs *fs);
bool sbfs_names_hold(struct sbfs *fs, uint64_t gen);
void sbfs_names_release(struct sbfs *fs);
uint64_t sbfs_nodes_open_fino(struct sbfs *fs, const char *id, const char *rel,
			      int64_t *ctime_ns);
/* a's change time in nanoseconds since the epoch. */
int64_t sbfs_attr_ctime_ns(const struct proto_attr *a);
uint64_t sbfs_nodes_vanish(struct sbfs *fs, const char *id, const char *rel);
void sbfs_nodes_vanished(struct sbfs *fs, uint64_t ino);
/* For cache_on_put (ud: the mount): the file of files/<rel> in sandbox id
 * has the attributes a (its inode number in the sandbox). */
void sbfs_nodes_learn(void *ud, const char *id, const char *rel,
		      const struct proto_attr *a);
void sbfs_nodes_move(struct sbfs *fs, const char *id, const char *from,
		     const char *to);

/* A change of files/<rel> made in the sandbox: every open file of it
 * drops what it read ahead or was given prefetched (fs_files). */
void sbfs_files_changed(struct sbx *sb, const char *rel);
/* files/<from>, open through the mount, is files/<to> now (renamed in
 * the sandbox): its open files' pending writes follow it. */
void sbfs_files_moved(struct sbx *sb, const char *from, const char *to);

/* ---- change events (events.c, doc/internals/cache.md) ------------------ */

/* Follow sb's change events from now on (its agent has them: health);
 * once, later calls do nothing. Not with -o noevents. */
void sbfs_events_follow(struct sbx *sb);
/* Stop following (the mount's end): joins the thread. */
void sbfs_events_free(struct sbx *sb);
/* Whether sb is live and every event the agent had when this mount last
 * asked (sbfs_events_sync) is applied; waits at most max_ms for it. */
bool sbfs_events_caught_up(struct sbx *sb, long max_ms);
/* Ask the agent where its events are now (one request) and wait at most
 * max_ms until they are applied: what the mount learnt from the agent
 * before (a job ended) is then seen in the files too. false when not
 * live, or not in time. */
bool sbfs_events_sync(struct sbx *sb, long max_ms);
/* How long an open waits for the events to catch up before it asks the
 * agent instead. */
#define SBFS_EVENTS_CATCH_UP_MS 100
/* ... and a reader of an ended job's output or status. */
#define SBFS_EVENTS_SETTLE_MS 500
/* The kernel's timeouts for an answer about path (a mount path) asked
 * for at cache mark: the options', or -o cache_timeout for files/ of a
 * live sandbox, 0 when the path changed meanwhile. */
void sbfs_timeouts(struct sbfs *fs, const char *path, uint64_t mark,
		   double *entry, double *attr, double *negative);
/* MOUNT/<sb>/events: one JSON line per change from the open on; a read
 * waits for the next change (EINTR on a signal). -EOPNOTSUPP when the
 * agent has no change events. */
int fs_events_open(struct sbx *sb, struct fuse_file_info *fi);
int fs_events_read(struct sbx *sb, char *buf, size_t size,
		   struct fuse_file_info *fi);
int fs_events_release(struct sbx *sb, struct fuse_file_info *fi);

/* Make the kernel forget what it caches of files/<rel> in sandbox id (its
 * attributes and pages), after a change it could not see (another name of
 * a hard-linked file). A no-op before the mount serves. */
void sbfs_kernel_forget(struct sbfs *fs, const char *id, const char *rel);

/*
 * What readlink shows for a link at rel (relative to the session root)
 * whose stored text is target: the target itself when it stays inside the
 * sandbox (or with -o symlinks=raw); otherwise a relative path that stays
 * inside files/ (SEMANTICS.md, symbolic links): an absolute target is taken
 * from the root of files/ (SBFS_SANDBOX_ROOT, where the sandbox's
 * commands see their root, is that root), and climbing above the root
 * stops at it. A heap string.
 */
char *sbfs_link_show(const struct sbfs *fs, const char *rel,
		     const char *target);

/* Where a sandbox's commands see its session root (doc/commands.md). */
#define SBFS_SANDBOX_ROOT "/sandbox"

/* The mode of the files that start or stop things (exec, ctl): the
 * mounting user's only, unless -o shared_exec (SEMANTICS.md, sharing). */
mode_t sbfs_control_mode(const struct sbfs *fs, bool readable);

/* Convert extension attributes to struct stat, as this mount shows them
 * (sb's identity as the mounting user, no set-id bits, no device numbers;
 * sb may be NULL). */
void sbfs_attr_to_stat(const struct sbx *sb, const struct proto_attr *a,
		       struct stat *st);

/* ---- files/ (fs_files.c, fs_files_v1.c) ----------------------------------- */

/*
 * The operations of files/, one table per way of reaching the files. rel
 * is the path relative to the session root ("" for files/ itself). fi may
 * be NULL where libfuse allows it. rename and link get two paths inside the
 * same sandbox (fs.c refuses others with EXDEV).
 */
struct fs_tree_ops {
	int (*getattr)(struct sbx *sb, const char *rel, struct stat *st,
		       struct fuse_file_info *fi);
	int (*readdir)(struct sbx *sb, const char *rel, void *buf,
		       fuse_fill_dir_t filler, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags fl);
	int (*open)(struct sbx *sb, const char *rel, struct fuse_file_info *fi);
	int (*create)(struct sbx *sb, const char *rel, mode_t mode,
		      struct fuse_file_info *fi);
	int (*read)(struct sbx *sb, const char *rel, char *buf, size_t size,
		    off_t off, struct fuse_file_info *fi);
	int (*write)(struct sbx *sb, const char *rel, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi);
	int (*flush)(struct sbx *sb, const char *rel,
		     struct fuse_file_info *fi);
	int (*release)(struct sbx *sb, const char *rel,
		       struct fuse_file_info *fi);
	int (*fsync)(struct sbx *sb, const char *rel, int datasync,
		     struct fuse_file_info *fi);
	int (*mkdir)(struct sbx *sb, const char *rel, mode_t mode);
	int (*unlink)(struct sbx *sb, const char *rel);
	int (*rmdir)(struct sbx *sb, const char *rel);
	int (*rename)(struct sbx *sb, const char *from, const char *to,
		      unsigned int flags);
	int (*link)(struct sbx *sb, const char *from, const char *to);
	int (*symlink)(struct sbx *sb, const char *target, const char *rel);
	int (*readlink)(struct sbx *sb, const char *rel, char *buf,
			size_t size);
	int (*chmod)(struct sbx *sb, const char *rel, mode_t mode,
		     struct fuse_file_info *fi);
	int (*truncate)(struct sbx *sb, const char *rel, off_t size,
			struct fuse_file_info *fi);
	int (*utimens)(struct sbx *sb, const char *rel,
		       const struct timespec tv[2], struct fuse_file_info *fi);
	int (*statfs)(struct sbx *sb, const char *rel, struct statvfs *st);
};

extern const struct fs_tree_ops fs_files_ops; /* the extension */
/* The mount's write table's flush function (wnodes.h): send a node's
 * gathered bytes to its sandbox's agent. */
struct wnode;
int fs_files_flush_node(void *ctx, struct wnode *w);
extern const struct fs_tree_ops fs_files_v1_ops; /* v1 and native */

/* The table for a sandbox entered with health (ext, v1 or native). */
const struct fs_tree_ops *sbfs_tree_ops(const struct sbx *sb);

/* ---- exec, jobs/ (fs_jobs.c) and info, ctl (fs_info.c) -------------------- */

/* Which job file a path names. */
enum fs_job_file {
	FS_JOB_DIR = 0,
	FS_JOB_CMD,
	FS_JOB_STDOUT,
	FS_JOB_STDERR,
	FS_JOB_STATUS,
	FS_JOB_EXIT,
	FS_JOB_CTL,
};

/* Free a sandbox's job state (at unmount). NULL-safe. */
void fs_jobs_free(struct fs_jobs *j);

/* MOUNT/<sandbox>/exec */
int fs_exec_getattr(struct sbx *sb, struct stat *st);
int fs_exec_open(struct sbx *sb, struct fuse_file_info *fi);
int fs_exec_write(struct sbx *sb, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi);
int fs_exec_read(struct sbx *sb, char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
int fs_exec_flush(struct sbx *sb, struct fuse_file_info *fi);
int fs_exec_release(struct sbx *sb, struct fuse_file_info *fi);

/* MOUNT/<sandbox>/jobs and below. job is NULL for jobs/ itself; "latest"
 * is the symlink. */
int fs_jobs_getattr(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct stat *st);
int fs_jobs_readdir(struct sbx *sb, const char *job, void *buf,
		    fuse_fill_dir_t filler);
int fs_jobs_readlink(struct sbx *sb, char *buf, size_t size);
int fs_jobs_open(struct sbx *sb, const char *job, enum fs_job_file f,
		 struct fuse_file_info *fi);
int fs_jobs_read(struct sbx *sb, const char *job, enum fs_job_file f, char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi);
int fs_jobs_write(struct sbx *sb, const char *job, enum fs_job_file f,
		  const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi);
int fs_jobs_release(struct sbx *sb, const char *job, enum fs_job_file f,
		    struct fuse_file_info *fi);

/* Whether what was written to a ctl file (buf, size bytes) is word,
 * blanks and a newline around it aside. */
bool sbfs_ctl_word(const char *buf, size_t size, const char *word);

/* MOUNT/<sandbox>/info and ctl */
int fs_info_getattr(struct sbx *sb, bool ctl, struct stat *st);
int fs_info_open(struct sbx *sb, bool ctl, struct fuse_file_info *fi);
int fs_info_read(struct sbx *sb, bool ctl, char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
int fs_info_write(struct sbx *sb, bool ctl, const char *buf, size_t size,
		  off_t off, struct fuse_file_info *fi);
int fs_info_release(struct sbx *sb, bool ctl, struct fuse_file_info *fi);

#endif
