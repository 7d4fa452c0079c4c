/* SPDX-License-Identifier: MIT */
/*
 * agent_helpers: what the agent's wire suites (check_agent*.c) share on
 * top of helpers.h: an agent over a root everyone may write, requests and
 * checked answers, exec streams, the job routes, the file extension's
 * requests, the processes a command leaves, and sandbox-agent run to its
 * exit. Every function fails the running test (ck_assert) when something
 * it needs does not hold.
 */
#ifndef SBFS_TEST_AGENT_HELPERS_H
#define SBFS_TEST_AGENT_HELPERS_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/proto.h"
#include "common/proto_exec.h"
#include "common/proto_files.h"
#include "tests/helpers.h"

/* The exec user of an agent the tests start as root. */
#define TA_NOBODY 65534

/* ---- an agent over a root everyone may write ---------------------------- */

/*
 * A private directory (mode 0711, so the exec user can pass through but
 * not list it) holding a session root that everyone may write, because as
 * root commands run as nobody, and the agent on it.
 */
struct ta_box {
	struct th_agent a;
	char *parent; /* private, 0711 */
	char *root; /* parent/root, 0777 */
};

/* Make the directories (th_tmpdir(tag)) without starting an agent. */
void ta_box_dirs(struct ta_box *b, const char *tag);
/* Make them and start an activated agent with extra options
 * (NULL-terminated, may be NULL), its stderr in log when not NULL. */
void ta_box_start(struct ta_box *b, const char *const *extra);
void ta_box_start_logged(struct ta_box *b, const char *const *extra,
			 const char *log);
/* Stop the agent, which must exit cleanly (status 0: its shutdown kills
 * and waits for every command, answers held polls and frees everything),
 * and remove the directories. */
void ta_box_stop(struct ta_box *b);

/* The suites' shared box and its checked fixtures: a plain agent, or one
 * with --strict-v1. */
extern struct ta_box ta_fx;
void ta_setup(void);
void ta_setup_strict(void);
void ta_teardown(void);

/* The exec user's uid for an agent the tests start. */
uid_t ta_exec_uid(void);
/* Can this machine run bubblewrap as the exec user? */
bool ta_bwrap_usable(void);
/* Whether dir/name exists (lstat). */
bool ta_exists(const char *dir, const char *name);
/* mkdir dir/name, mode 0777 whatever the umask. */
void ta_mkdir_in(const char *dir, const char *name);

/* ---- requests --------------------------------------------------------- */

/* The body as a string (NUL-terminated by buf). */
const char *ta_body(const struct th_resp *r);
/* Status and body exactly. */
void ta_assert_resp(const struct th_resp *r, long status, const char *body);
/* Status and no body at all (not one byte); r is cleaned up. */
void ta_expect_empty(struct th_resp *r, long status);
/* POST json to path with the credential. */
void ta_post(const struct th_agent *a, const char *path, const char *json,
	     struct th_resp *r);
/* POST and expect status and exactly body want. */
void ta_expect_post(const struct th_agent *a, const char *path,
		    const char *json, long status, const char *want);
/* The same, the answer also typed text/plain (a typed error). */
void ta_expect_post_text(const struct th_agent *a, const char *path,
			 const char *json, long status, const char *want);
/* GET /v1/health<query> of a (without a credential), which must answer
 * 200; the answer into r, for the caller to look at and clean up. */
void ta_health_get(const struct th_agent *a, const char *query,
		   struct th_resp *r);
/* The agent's health, decoded (without a credential). */
void ta_health(const struct th_agent *a, struct proto_health *h);

/* ---- exec streams ------------------------------------------------------ */

struct ta_frames {
	struct proto_frame *f;
	size_t n;
	struct buf out; /* stdout bytes */
	struct buf err; /* stderr bytes */
};

/* POST /v1/exec and parse the answer, checking the stream's shape: 200
 * NDJSON, every line a frame, exactly one terminal frame and it is the
 * last. */
void ta_exec(const struct th_agent *a, const char *json, struct ta_frames *fr);
void ta_frames_free(struct ta_frames *fr);
const struct proto_frame *ta_last(const struct ta_frames *fr);
/* stdout must be want and the command must have exited with code. */
void ta_expect_output(const struct th_agent *a, const char *json,
		      const char *want, int code);
/* The messages of a command that cannot start (doc/commands.md). */
#define TA_ENOENT "No such file or directory (os error 2)"
#define TA_EACCES "Permission denied (os error 13)"
/* The whole answer must be one spawnFailed error frame saying message. */
void ta_expect_spawn_failed(const struct th_agent *a, const char *json,
			    const char *message);

/* ---- the job routes ---------------------------------------------------- */

/* Start a job; its id (36 characters) into id. */
void ta_job_start(const struct th_agent *a, const char *json, char id[64]);
/* One poll of the job with extra members (may be NULL); the answer body
 * (heap) and its status. */
char *ta_job_poll(const struct th_agent *a, const char *id, const char *extra,
		  long *status);
/* Poll until the job has ended (every answer 200); the last answer. */
char *ta_job_poll_ended(const struct th_agent *a, const char *id,
			const char *extra);

/* ---- one agent and its root -------------------------------------------- */

/* The suites' shared plain agent (th_agent_start), its root handed to
 * the exec user; the checked fixtures that start it activated or not, and
 * stop it. */
extern struct th_agent ta_ag;
void ta_agent_setup(void);
void ta_agent_setup_unactivated(void);
void ta_agent_teardown(void);

/* a is up: its health answers 200. */
void ta_expect_alive(const struct th_agent *a);
/* A file at a's root/rel, the root then handed to the exec user. */
void ta_fixture(const struct th_agent *a, const char *rel, const void *data,
		size_t n);
/*
 * An agent the test starts its own way (as another user, in a user
 * namespace): ta_agent_dirs makes a's directory (th_tmpdir(tag)), root
 * and token file names and the port file's path into portfile[size];
 * ta_agent_exec, in the test's child, runs sandbox-agent on them,
 * unconfined and activated (from fd, ta_agent_open's, when it is not -1:
 * a child that drops root's privileges may not reach the build
 * directory, in a 0700 home); th_agent_await (helpers.h), in the test,
 * waits for it.
 */
void ta_agent_dirs(struct th_agent *a, const char *tag, char *portfile,
		   size_t size);
int ta_agent_open(void);
__attribute__((noreturn)) void ta_agent_exec(const struct th_agent *a,
					     const char *portfile, int fd);
/* dir/rel (heap). */
char *ta_join(const char *dir, const char *rel);
/* Hand path (itself, no symlink followed) to the user the agent acts as
 * (when the tests run as root). */
void ta_own(const char *path);
/* Fixtures at dir/rel, each handed to that user. */
void ta_put_file(const char *dir, const char *rel, const char *text);
void ta_make_dir(const char *dir, const char *rel);
void ta_make_link(const char *dir, const char *rel, const char *target);
/* The contents of dir/rel (heap, NUL-terminated), NULL when missing. */
char *ta_slurp(const char *dir, const char *rel, size_t *len);
/* dir/rel holds exactly the n bytes data (else the test fails). */
void ta_expect_contents(const char *dir, const char *rel, const void *data,
			size_t n);
void ta_lstat_at(const char *dir, const char *rel, struct stat *st);

/* Status and body exactly, then r is cleaned up. */
void ta_expect_resp(struct th_resp *r, long status, const char *body);
/* A 200 attribute answer that matches lstat of root/rel, with the link
 * text target (NULL: none); r is cleaned up. */
struct proto_attr ta_expect_attr(const char *root, struct th_resp *r,
				 const char *rel, const char *target);

/* ---- the file extension ------------------------------------------------ */

/* Percent-encode a query value (heap). */
char *ta_qenc(const char *s);
/* One request to /sandboxfs/v1/<target> with the credential, an optional
 * content type and an optional extra header. */
void ta_ext_req(const struct th_agent *a, const char *method,
		const char *target, const char *ctype, const char *extra,
		const void *body, size_t len, struct th_resp *out);
/* GET op?path=<path><more> */
void ta_ext_get(const struct th_agent *a, const char *op, const char *path,
		const char *more, const char *extra, struct th_resp *out);
void ta_ext_post(const struct th_agent *a, const char *op, const char *json,
		 struct th_resp *out);
/* PUT write?path=<path>&<how> */
void ta_ext_write(const struct th_agent *a, const char *path, const char *how,
		  const void *data, size_t n, struct th_resp *out);
/* ta_ext_get (no extra header) and ta_ext_post, each answer then checked
 * for status and exactly body want. */
void ta_ext_expect_get(const struct th_agent *a, const char *op,
		       const char *path, const char *more, long status,
		       const char *want);
void ta_ext_expect_post(const struct th_agent *a, const char *op,
			const char *json, long status, const char *want);
/* GET /sandboxfs/v1/<target> without the credential is refused (401). */
void ta_ext_expect_no_credential(const struct th_agent *a, const char *target);
/* /sandboxfs/v1/<target> is no route of a (an agent with --strict-v1):
 * GET, PUT and POST of the JSON body, with the credential, each get an
 * empty 404. */
void ta_ext_expect_no_route(const struct th_agent *a, const char *target,
			    const char *body);
/* GET op?path=<path> must be refused as an escape: 409 "FS_ERROR: ELOOP:
 * path leaves the session root: <path>" (doc/protocol-ext.md). */
void ta_ext_expect_escape(const struct th_agent *a, const char *op,
			  const char *path);
/* GET op?path=<path> must find nothing there: 404 "PATH_NOT_FOUND: No
 * such file in the sandbox: <path>" (doc/protocol-ext.md). */
void ta_ext_expect_missing(const struct th_agent *a, const char *op,
			   const char *path);

/* ---- processes ---------------------------------------------------------- */

/* A string no other process on the machine has in its command line, used
 * as a sleep duration. */
const char *ta_needle(void);
/* Live (not zombie) processes whose command line holds s. */
int ta_count_procs(const char *s);
/* Wait up to ms for every process with s to be gone; the count left. */
int ta_procs_gone(const char *s, int ms);
/* /proc/<pid>/<name> into buf (NUL-terminated, NULs inside kept): the
 * bytes read, or -1. */
ssize_t ta_proc_read(const char *pid, const char *name, char *buf, size_t size);
/* What follows the command's name in /proc/<pid>/stat ("S 123 ..."),
 * pointing into buf; NULL when it cannot be read. */
const char *ta_proc_stat(const char *pid, char *buf, size_t size);

/* ---- the program ------------------------------------------------------ */

/* Run sandbox-agent with args (NULL-terminated, without the program) until
 * it exits (10 s at most); its wait status, its stderr and stdout in *err
 * (heap). */
int ta_run_agent(const char *const *args, char **err);

#endif
