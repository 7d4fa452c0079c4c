/* SPDX-License-Identifier: MIT */
/* agent_helpers: see agent_helpers.h. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/agent_helpers.h"

#define MAX_FRAMES 8192

/* ---- an agent over a root everyone may write ---------------------------- */

struct ta_box ta_fx;

void ta_box_dirs(struct ta_box *b, const char *tag)
{
	memset(b, 0, sizeof(*b));
	b->parent = th_tmpdir(tag);
	ck_assert(chmod(b->parent, 0711) == 0);
	ck_assert(asprintf(&b->root, "%s/root", b->parent) > 0);
	ck_assert(mkdir(b->root, 0777) == 0);
	ck_assert(chmod(b->root, 0777) == 0);
}

void ta_box_start_logged(struct ta_box *b, const char *const *extra,
			 const char *log)
{
	const char *args[32];
	size_t n = 0, i;

	if (b->parent == NULL)
		ta_box_dirs(b, "agent");
	/* The later --root wins over the helper's own. */
	args[n++] = "--root";
	args[n++] = b->root;
	for (i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	th_agent_start_logged(&b->a, args, true, log);
}

void ta_box_start(struct ta_box *b, const char *const *extra)
{
	memset(b, 0, sizeof(*b));
	ta_box_start_logged(b, extra, NULL);
}

void ta_box_stop(struct ta_box *b)
{
	int status = th_agent_terminate(&b->a);

	th_agent_stop(&b->a);
	th_rmtree(b->parent);
	free(b->parent);
	free(b->root);
	b->parent = b->root = NULL;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "sandbox-agent ended with status %d", status);
}

void ta_setup(void)
{
	ta_box_start(&ta_fx, NULL);
}

void ta_setup_strict(void)
{
	const char *extra[] = {"--strict-v1", NULL};

	ta_box_start(&ta_fx, extra);
}

void ta_teardown(void)
{
	ta_box_stop(&ta_fx);
}

uid_t ta_exec_uid(void)
{
	return geteuid() == 0 ? TA_NOBODY : geteuid();
}

bool ta_bwrap_usable(void)
{
	pid_t pid;
	int status;

	if (access(BWRAP_PATH, X_OK) < 0)
		return false;
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		dup2(fd, 1);
		dup2(fd, 2);
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) < 0 || setgid(TA_NOBODY) < 0 ||
		     setuid(TA_NOBODY) < 0))
			_exit(1);
		execl(BWRAP_PATH, BWRAP_PATH, "--unshare-all", "--share-net",
		      "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		      "true", (char *)NULL);
		_exit(1);
	}
	ck_assert(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool ta_exists(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

void ta_mkdir_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(mkdir(path, 0777), 0);
	ck_assert_int_eq(chmod(path, 0777), 0);
}

/* ---- requests --------------------------------------------------------- */

const char *ta_body(const struct th_resp *r)
{
	return r->body.data ? r->body.data : "";
}

void ta_assert_resp(const struct th_resp *r, long status, const char *body)
{
	ck_assert_msg(r->status == status, "status %ld, wanted %ld: %s",
		      r->status, status, ta_body(r));
	ck_assert_msg(strcmp(ta_body(r), body) == 0, "body '%s', wanted '%s'",
		      ta_body(r), body);
}

void ta_expect_empty(struct th_resp *r, long status)
{
	ck_assert_int_eq(r->status, status);
	ck_assert_uint_eq(r->body.len, 0);
	th_resp_cleanup(r);
}

void ta_post(const struct th_agent *a, const char *path, const char *json,
	     struct th_resp *r)
{
	const char *h[] = {a->auth, "Content-Type: application/json", NULL};
	char url[512];

	snprintf(url, sizeof(url), "%s%s", a->base, path);
	th_http("POST", url, h, json, strlen(json), r);
}

void ta_expect_post(const struct th_agent *a, const char *path,
		    const char *json, long status, const char *want)
{
	struct th_resp r;

	ta_post(a, path, json, &r);
	ck_assert_msg(r.status == status, "%s %s: %ld %s", path, json, r.status,
		      ta_body(&r));
	ck_assert_str_eq(ta_body(&r), want);
	th_resp_cleanup(&r);
}

void ta_expect_post_text(const struct th_agent *a, const char *path,
			 const char *json, long status, const char *want)
{
	struct th_resp r;
	char *ct;

	ta_post(a, path, json, &r);
	ck_assert_msg(r.status == status, "%s %s: %ld %s", path, json, r.status,
		      ta_body(&r));
	ck_assert_str_eq(ta_body(&r), want);
	ct = th_resp_header(&r, "Content-Type");
	ck_assert_str_eq(ct, "text/plain; charset=utf-8");
	free(ct);
	th_resp_cleanup(&r);
}

void ta_health_get(const struct th_agent *a, const char *query,
		   struct th_resp *r)
{
	char url[256];

	snprintf(url, sizeof(url), "%s/v1/health%s", a->base, query);
	th_http("GET", url, NULL, NULL, 0, r);
	ck_assert_int_eq(r->status, 200);
}

void ta_health(const struct th_agent *a, struct proto_health *h)
{
	struct th_resp r;

	ta_health_get(a, "", &r);
	ck_assert_int_eq(proto_health_decode(r.body.data, r.body.len, h), 0);
	th_resp_cleanup(&r);
}

/* ---- exec streams ------------------------------------------------------ */

static void parse_frames(const struct th_resp *r, struct ta_frames *fr)
{
	struct proto_ndjson s;
	char *ct = th_resp_header(r, "Content-Type");
	const char *line;
	size_t len, i, terminals = 0;

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status,
		      ta_body(r));
	ck_assert_ptr_nonnull(ct);
	ck_assert_str_eq(ct, "application/x-ndjson");
	free(ct);
	memset(fr, 0, sizeof(*fr));
	fr->f = calloc(MAX_FRAMES, sizeof(*fr->f));
	buf_init(&fr->out, 0);
	buf_init(&fr->err, 0);
	proto_ndjson_init(&s);
	ck_assert_int_eq(proto_ndjson_feed(&s, ta_body(r), r->body.len), 0);
	while (proto_ndjson_next(&s, &line, &len) == 1) {
		ck_assert_uint_lt(fr->n, MAX_FRAMES);
		ck_assert_msg(proto_frame_decode(line, len, &fr->f[fr->n]) == 0,
			      "bad frame: %.*s", (int)len, line);
		fr->n++;
	}
	ck_assert(!proto_ndjson_partial(&s));
	proto_ndjson_cleanup(&s);
	for (i = 0; i < fr->n; i++) {
		struct proto_frame *f = &fr->f[i];

		if (f->type == PROTO_FRAME_EXIT || f->type == PROTO_FRAME_ERROR)
			terminals++;
		else if (f->type == PROTO_FRAME_STDOUT)
			ck_assert_int_eq(buf_append(&fr->out, f->data, f->len),
					 0);
		else
			ck_assert_int_eq(buf_append(&fr->err, f->data, f->len),
					 0);
	}
	ck_assert_uint_eq(terminals, 1);
	ck_assert(fr->f[fr->n - 1].type == PROTO_FRAME_EXIT ||
		  fr->f[fr->n - 1].type == PROTO_FRAME_ERROR);
}

void ta_exec(const struct th_agent *a, const char *json, struct ta_frames *fr)
{
	struct th_resp r;

	ta_post(a, "/v1/exec", json, &r);
	parse_frames(&r, fr);
	th_resp_cleanup(&r);
}

void ta_frames_free(struct ta_frames *fr)
{
	size_t i;

	for (i = 0; i < fr->n; i++)
		proto_frame_cleanup(&fr->f[i]);
	free(fr->f);
	buf_cleanup(&fr->out);
	buf_cleanup(&fr->err);
}

const struct proto_frame *ta_last(const struct ta_frames *fr)
{
	return &fr->f[fr->n - 1];
}

void ta_expect_output(const struct th_agent *a, const char *json,
		      const char *want, int code)
{
	struct ta_frames fr;

	ta_exec(a, json, &fr);
	ck_assert_msg(ta_last(&fr)->type == PROTO_FRAME_EXIT, "%s: %s %s", json,
		      ta_last(&fr)->err_code ? ta_last(&fr)->err_code : "",
		      ta_last(&fr)->err_message ? ta_last(&fr)->err_message
						: "");
	ck_assert_str_eq(fr.out.data ? fr.out.data : "", want);
	ck_assert_int_eq(ta_last(&fr)->code, code);
	ta_frames_free(&fr);
}

void ta_expect_spawn_failed(const struct th_agent *a, const char *json,
			    const char *message)
{
	char want[256];

	snprintf(want, sizeof(want),
		 "{\"t\":\"error\",\"code\":\"spawnFailed\",\"message\":"
		 "\"%s\"}\n",
		 message);
	ta_expect_post(a, "/v1/exec", json, 200, want);
}

/* ---- the job routes ---------------------------------------------------- */

void ta_job_start(const struct th_agent *a, const char *json, char id[64])
{
	struct th_resp r;
	const char *p;

	ta_post(a, "/v1/jobs/start", json, &r);
	ck_assert_msg(r.status == 200, "start: %ld %s", r.status, ta_body(&r));
	p = ta_body(&r);
	ck_assert_uint_eq(strlen(p), 48);
	ck_assert(strncmp(p, "{\"jobId\":\"", 10) == 0);
	ck_assert_str_eq(p + 46, "\"}");
	memcpy(id, p + 10, 36);
	id[36] = '\0';
	th_resp_cleanup(&r);
}

char *ta_job_poll(const struct th_agent *a, const char *id, const char *extra,
		  long *status)
{
	char json[256];
	struct th_resp r;
	char *s;

	snprintf(json, sizeof(json), "{\"jobId\":\"%s\"%s}", id,
		 extra ? extra : "");
	ta_post(a, "/v1/jobs/poll", json, &r);
	*status = r.status;
	s = buf_take(&r.body, NULL);
	th_resp_cleanup(&r);
	return s;
}

char *ta_job_poll_ended(const struct th_agent *a, const char *id,
			const char *extra)
{
	long long end = th_now_ms() + 20000;
	long status;
	char *s;

	for (;;) {
		s = ta_job_poll(a, id, extra, &status);
		ck_assert_msg(status == 200, "poll: %ld %s", status, s);
		if (strncmp(s, "{\"running\":false", 16) == 0)
			return s;
		ck_assert_msg(th_now_ms() < end, "job %s never ended", id);
		free(s);
		usleep(30000);
	}
}

/* ---- one agent and its root -------------------------------------------- */

struct th_agent ta_ag;

void ta_agent_setup(void)
{
	th_agent_start(&ta_ag, NULL, true);
	th_give_to_exec_user(ta_ag.root);
}

void ta_agent_setup_unactivated(void)
{
	th_agent_start(&ta_ag, NULL, false);
	th_give_to_exec_user(ta_ag.root);
}

void ta_agent_teardown(void)
{
	th_agent_stop(&ta_ag);
}

void ta_expect_alive(const struct th_agent *a)
{
	struct th_resp r;

	ta_health_get(a, "", &r);
	th_resp_cleanup(&r);
}

void ta_fixture(const struct th_agent *a, const char *rel, const void *data,
		size_t n)
{
	char *p = ta_join(a->root, rel);

	th_write_file(p, data, n);
	th_give_to_exec_user(a->root);
	free(p);
}

void ta_agent_dirs(struct th_agent *a, const char *tag, char *portfile,
		   size_t size)
{
	memset(a, 0, sizeof(*a));
	a->dir = th_tmpdir(tag);
	if (asprintf(&a->root, "%s/root", a->dir) < 0 ||
	    asprintf(&a->token_file, "%s/token", a->dir) < 0)
		ck_abort_msg("asprintf");
	ck_assert_int_eq(mkdir(a->root, 0755), 0);
	snprintf(portfile, size, "%s/port", a->dir);
}

int ta_agent_open(void)
{
	int fd = open(th_program("sandbox-agent"), O_RDONLY | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "open %s", th_program("sandbox-agent"));
	return fd;
}

void ta_agent_exec(const struct th_agent *a, const char *portfile, int fd)
{
	const char *argv[] = {"sandbox-agent",
			      "--root",
			      a->root,
			      "--port",
			      "0",
			      "--port-file",
			      portfile,
			      "--token-file",
			      a->token_file,
			      "--confine",
			      "none",
			      "--activated",
			      NULL};

	/* exec(2) takes its arguments as they are: the casts only meet
	 * its prototype. */
	if (fd >= 0)
		fexecve(fd, (char *const *)(uintptr_t)argv, environ);
	else
		execv(th_program("sandbox-agent"),
		      (char *const *)(uintptr_t)argv);
	_exit(127);
}

char *ta_join(const char *dir, const char *rel)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, rel) < 0)
		ck_abort_msg("asprintf");
	return p;
}

void ta_own(const char *path)
{
	if (geteuid() == 0)
		ck_assert_msg(lchown(path, TA_NOBODY, TA_NOBODY) == 0,
			      "chown %s", path);
}

void ta_put_file(const char *dir, const char *rel, const char *text)
{
	char *p = ta_join(dir, rel);

	th_write_file(p, text, strlen(text));
	ta_own(p);
	free(p);
}

void ta_make_dir(const char *dir, const char *rel)
{
	char *p = ta_join(dir, rel);

	ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s", p);
	ta_own(p);
	free(p);
}

void ta_make_link(const char *dir, const char *rel, const char *target)
{
	char *p = ta_join(dir, rel);

	ck_assert_msg(symlink(target, p) == 0, "symlink %s", p);
	ta_own(p);
	free(p);
}

char *ta_slurp(const char *dir, const char *rel, size_t *len)
{
	char *p = ta_join(dir, rel), *text = th_read_file(p, len);

	free(p);
	return text;
}

void ta_expect_contents(const char *dir, const char *rel, const void *data,
			size_t n)
{
	size_t len;
	char *text = ta_slurp(dir, rel, &len);

	ck_assert_msg(text != NULL, "%s/%s is missing", dir, rel);
	ck_assert_msg(len == n && memcmp(text, data, n) == 0,
		      "%s/%s: not the %zu bytes expected (%zu bytes)", dir, rel,
		      n, len);
	free(text);
}

void ta_lstat_at(const char *dir, const char *rel, struct stat *st)
{
	char *p = ta_join(dir, rel);

	ck_assert_msg(lstat(p, st) == 0, "lstat %s", p);
	free(p);
}

void ta_expect_resp(struct th_resp *r, long status, const char *body)
{
	ta_assert_resp(r, status, body);
	th_resp_cleanup(r);
}

struct proto_attr ta_expect_attr(const char *root, struct th_resp *r,
				 const char *rel, const char *target)
{
	struct proto_attr a;
	struct stat st;
	char *t = NULL;

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status,
		      r->body.data ? r->body.data : "");
	ck_assert_int_eq(proto_attr_decode(r->body.data, r->body.len, &a, &t),
			 0);
	ta_lstat_at(root, rel, &st);
	ck_assert_uint_eq(a.perm, st.st_mode & 07777);
	ck_assert_uint_eq(a.size, (uint64_t)st.st_size);
	ck_assert_uint_eq(a.ino, st.st_ino);
	ck_assert_uint_eq(a.nlink, st.st_nlink);
	ck_assert_uint_eq(a.uid, st.st_uid);
	ck_assert_uint_eq(a.gid, st.st_gid);
	ck_assert_int_eq(a.mtime, st.st_mtim.tv_sec);
	ck_assert_uint_eq(a.mtime_ns, st.st_mtim.tv_nsec);
	ck_assert_uint_eq(a.blocks, (uint64_t)st.st_blocks);
	if (S_ISREG(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_FILE);
	else if (S_ISDIR(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_DIR);
	else if (S_ISLNK(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_SYMLINK);
	else if (S_ISFIFO(st.st_mode))
		ck_assert_int_eq(a.type, PROTO_FT_FIFO);
	if (target != NULL)
		ck_assert_str_eq(t, target);
	else
		ck_assert_ptr_null(t);
	free(t);
	th_resp_cleanup(r);
	return a;
}

/* ---- the file extension ------------------------------------------------ */

char *ta_qenc(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	ck_assert_ptr_nonnull(out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~' || c == '/') {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

void ta_ext_req(const struct th_agent *a, const char *method,
		const char *target, const char *ctype, const char *extra,
		const void *body, size_t len, struct th_resp *out)
{
	const char *h[4];
	char url[8192 + 256], ct[128];
	size_t n = 0;

	h[n++] = a->auth;
	if (ctype != NULL) {
		snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
		h[n++] = ct;
	}
	if (extra != NULL)
		h[n++] = extra;
	h[n] = NULL;
	snprintf(url, sizeof(url), "%s/sandboxfs/v1/%s", a->base, target);
	th_http(method, url, h, body, len, out);
}

void ta_ext_expect_no_credential(const struct th_agent *a, const char *target)
{
	char url[8192 + 256];
	struct th_resp r;

	snprintf(url, sizeof(url), "%s/sandboxfs/v1/%s", a->base, target);
	th_http("GET", url, NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 401);
	th_resp_cleanup(&r);
}

void ta_ext_expect_no_route(const struct th_agent *a, const char *target,
			    const char *body)
{
	static const char *const methods[] = {"GET", "PUT", "POST"};
	struct th_resp r;
	size_t m;

	for (m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
		ta_ext_req(a, methods[m], target, "application/json", NULL,
			   body, strlen(body), &r);
		ck_assert_msg(r.status == 404 && r.body.len == 0, "%s %s: %ld",
			      methods[m], target, r.status);
		th_resp_cleanup(&r);
	}
}

void ta_ext_get(const struct th_agent *a, const char *op, const char *path,
		const char *more, const char *extra, struct th_resp *out)
{
	char target[8192];
	char *e = ta_qenc(path);

	snprintf(target, sizeof(target), "%s?path=%s%s", op, e,
		 more ? more : "");
	free(e);
	ta_ext_req(a, "GET", target, NULL, extra, NULL, 0, out);
}

void ta_ext_post(const struct th_agent *a, const char *op, const char *json,
		 struct th_resp *out)
{
	ta_ext_req(a, "POST", op, "application/json", NULL, json, strlen(json),
		   out);
}

void ta_ext_write(const struct th_agent *a, const char *path, const char *how,
		  const void *data, size_t n, struct th_resp *out)
{
	char target[8192];
	char *e = ta_qenc(path);

	snprintf(target, sizeof(target), "write?path=%s&%s", e, how);
	free(e);
	ta_ext_req(a, "PUT", target, "application/octet-stream", NULL, data, n,
		   out);
}

void ta_ext_expect_get(const struct th_agent *a, const char *op,
		       const char *path, const char *more, long status,
		       const char *want)
{
	struct th_resp r;

	ta_ext_get(a, op, path, more, NULL, &r);
	ta_expect_resp(&r, status, want);
}

void ta_ext_expect_post(const struct th_agent *a, const char *op,
			const char *json, long status, const char *want)
{
	struct th_resp r;

	ta_ext_post(a, op, json, &r);
	ta_expect_resp(&r, status, want);
}

/* GET op?path=<path> must be refused with status and the body why
 * followed by the path, as the agent's error answers are. */
static void expect_path_error(const struct th_agent *a, const char *op,
			      const char *path, long status, const char *why)
{
	char want[512];

	snprintf(want, sizeof(want), "%s%s", why, path);
	ta_ext_expect_get(a, op, path, NULL, status, want);
}

void ta_ext_expect_escape(const struct th_agent *a, const char *op,
			  const char *path)
{
	expect_path_error(a, op, path, 409,
			  "FS_ERROR: ELOOP: path leaves the session root: ");
}

void ta_ext_expect_missing(const struct th_agent *a, const char *op,
			   const char *path)
{
	expect_path_error(a, op, path, 404,
			  "PATH_NOT_FOUND: No such file in the sandbox: ");
}

/* ---- processes ---------------------------------------------------------- */

const char *ta_needle(void)
{
	static char s[32];
	static unsigned n;

	snprintf(s, sizeof(s), "%u.%u", 700 + n++, (unsigned)getpid() % 1000);
	return s;
}

ssize_t ta_proc_read(const char *pid, const char *name, char *buf, size_t size)
{
	char path[300];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

const char *ta_proc_stat(const char *pid, char *buf, size_t size)
{
	char *rp;

	if (ta_proc_read(pid, "stat", buf, size) <= 0)
		return NULL;
	rp = strrchr(buf, ')');
	if (rp == NULL || rp[1] != ' ' || rp[2] == '\0')
		return NULL;
	return rp + 2;
}

int ta_count_procs(const char *s)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int count = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		char cmd[4096], stat[512], *rp;
		ssize_t n, i;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		n = ta_proc_read(e->d_name, "cmdline", cmd, sizeof(cmd));
		if (n <= 0)
			continue;
		for (i = 0; i < n; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		if (strstr(cmd, s) == NULL)
			continue;
		if (ta_proc_read(e->d_name, "stat", stat, sizeof(stat)) <= 0)
			continue;
		rp = strrchr(stat, ')');
		if (rp != NULL && rp[1] == ' ' && rp[2] == 'Z')
			continue;
		count++;
	}
	closedir(d);
	return count;
}

int ta_procs_gone(const char *s, int ms)
{
	long long end = th_now_ms() + ms;
	int n;

	while ((n = ta_count_procs(s)) > 0 && th_now_ms() < end)
		usleep(20000);
	return n;
}

/* ---- the program ------------------------------------------------------ */

int ta_run_agent(const char *const *args, char **err)
{
	const char *argv[32];
	char *dir = th_tmpdir("agent-run"), *log;
	size_t i, n = 0;
	int status = -1, fd;
	long long deadline = th_now_ms() + 10000;
	pid_t pid;

	ck_assert(asprintf(&log, "%s/stderr", dir) > 0);
	argv[n++] = th_program("sandbox-agent");
	for (i = 0; args[i] != NULL && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (th_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			ck_abort_msg("sandbox-agent did not exit");
		}
		usleep(10000);
	}
	*err = th_read_file(log, NULL);
	th_rmtree(dir);
	free(dir);
	free(log);
	return status;
}
