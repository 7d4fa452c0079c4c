/* SPDX-License-Identifier: MIT */
/*
 * sandboxctl jobs: the jobs a sandbox's agent keeps (GET /sandboxfs/v1/jobs,
 * doc/protocol-ext.md 10), whoever started them, as a table or as the
 * agent's own JSON members (man/sandboxctl.1, "jobs"). A sandbox without a
 * running agent has no jobs: they live in the agent's memory.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "ctl/ctl.h"
#include "client/local_state.h"

#define EXIT_USAGE 2

static int usage(const char *what)
{
	fprintf(stderr,
		"sandboxctl: jobs: %s\nusage: sandboxctl jobs NAME [--json]\n",
		what);
	return EXIT_USAGE;
}

/* One command word as a POSIX shell would read it back; control bytes
 * (which a terminal would act on) as $'\xNN'. */
static int quote_word(struct buf *b, const char *w)
{
	static const char plain[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_@%+=:,./-";
	const unsigned char *p;
	bool ctl = false;
	int rc = 0;

	if (w[0] != '\0' && w[strspn(w, plain)] == '\0')
		return buf_append_str(b, w);
	for (p = (const unsigned char *)w; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			ctl = true;
	if (!ctl) {
		rc = buf_append_str(b, "'");
		for (p = (const unsigned char *)w; rc == 0 && *p; p++)
			rc = *p == '\'' ? buf_append_str(b, "'\\''")
					: buf_append(b, p, 1);
		return rc ? rc : buf_append_str(b, "'");
	}
	rc = buf_append_str(b, "$'");
	for (p = (const unsigned char *)w; rc == 0 && *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			rc = buf_printf(b, "\\x%02x", *p);
		else if (*p == '\'' || *p == '\\')
			rc = buf_printf(b, "\\%c", *p);
		else
			rc = buf_append(b, p, 1);
	}
	return rc ? rc : buf_append_str(b, "'");
}

static char *command_text(const struct proto_job_info *ji)
{
	struct buf b = BUF_INIT(0);
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < ji->argc; i++) {
		if (i > 0)
			rc = buf_append_str(&b, " ");
		if (rc == 0)
			rc = quote_word(&b, ji->argv[i]);
	}
	if (rc < 0) {
		buf_cleanup(&b);
		return NULL;
	}
	return buf_take(&b, NULL);
}

/* The state as the listing names it (proto_jobs.c), "?" when unknown. */
static const char *state_text(enum proto_job_state s)
{
	const char *name = proto_job_state_name(s);

	return name != NULL ? name : "?";
}

/* The exit code, or a failed job's error code (timeoutExceeded ...). */
static void exit_text(const struct proto_job_info *ji, char *out, size_t size)
{
	if (ji->state == PROTO_JOB_EXITED)
		snprintf(out, size, "%" PRId32, ji->exit_code);
	else if (ji->state == PROTO_JOB_FAILED && ji->err_code != NULL &&
		 ji->err_code[0] != '\0')
		snprintf(out, size, "%s", ji->err_code);
	else
		snprintf(out, size, "-");
}

static void time_text(int64_t ms, char *out, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || localtime_r(&t, &tm) == NULL ||
	    strftime(out, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(out, size, "-");
}

static int print_table(const struct proto_job_list *l)
{
	int wstate = 5, wexit = 4;
	char ex[64], when[32];
	size_t i;

	for (i = 0; i < l->n; i++) {
		int n = (int)strlen(state_text(l->jobs[i].state));

		wstate = n > wstate ? n : wstate;
		exit_text(&l->jobs[i], ex, sizeof(ex));
		n = (int)strlen(ex);
		wexit = n > wexit ? n : wexit;
	}
	printf("%-36s  %-*s  %-*s  %-19s  %s\n", "ID", wstate, "STATE", wexit,
	       "EXIT", "STARTED", "COMMAND");
	for (i = 0; i < l->n; i++) {
		const struct proto_job_info *ji = &l->jobs[i];
		char *cmd = command_text(ji);

		exit_text(ji, ex, sizeof(ex));
		time_text(ji->started_ms, when, sizeof(when));
		printf("%-36s  %-*s  %-*s  %-19s  %s\n", ji->job_id, wstate,
		       state_text(ji->state), wexit, ex, when, cmd ? cmd : "?");
		free(cmd);
	}
	return 0;
}

static int print_json(const struct proto_job_list *l)
{
	struct buf b = BUF_INIT(0);
	size_t i;
	int rc;

	rc = proto_job_list_encode_head(&b);
	for (i = 0; rc == 0 && i < l->n; i++)
		rc = proto_job_list_encode_entry(&l->jobs[i], i == 0, &b);
	if (rc == 0)
		rc = proto_job_list_encode_tail(l->complete, &b);
	if (rc == 0)
		rc = buf_append_str(&b, "\n");
	if (rc == 0 && fwrite(b.data, 1, b.len, stdout) != b.len)
		rc = -EIO;
	buf_cleanup(&b);
	if (rc < 0)
		fprintf(stderr, "sandboxctl: jobs: %s\n", strerror(-rc));
	return rc < 0 ? EXIT_FAILURE : 0;
}

/*
 * Whether the sandbox has an agent to ask: 1 yes, 0 no (no jobs), or -1
 * after saying why not.
 */
static int has_agent(struct local_ctl *c, const char *name, const char **why)
{
	struct local_err err = {""};
	struct local_status s;
	int rc;

	rc = local_ctl_status(c, name, &s, &err);
	if (rc == -ENOENT) {
		fprintf(stderr, "sandboxctl: no sandbox '%s' in %s\n", name,
			c->state_dir);
		return -1;
	}
	if (rc < 0) {
		fprintf(stderr, "sandboxctl: %s\n",
			err.msg[0] ? err.msg : strerror(-rc));
		return -1;
	}
	if (proto_record_transport(&s.rec) == PROTO_RECORD_NATIVE) {
		fprintf(stderr,
			"sandboxctl: sandbox '%s' is native: it has no agent "
			"and no jobs (a mount keeps its commands)\n",
			name);
		rc = -1;
	} else if (s.rec.strict_v1) {
		fprintf(stderr,
			"sandboxctl: sandbox '%s' runs its agent with "
			"--strict-v1, which does not list jobs\n",
			name);
		rc = -1;
	} else if (s.rec.state != PROTO_RECORD_RUNNING || !s.alive) {
		*why = s.rec.state != PROTO_RECORD_RUNNING ? "is not running"
							   : "has no agent";
		rc = 0;
	} else {
		rc = 1;
	}
	local_status_cleanup(&s);
	return rc;
}

int cmd_jobs(struct local_ctl *c, int argc, char **argv)
{
	struct proto_job_list l = {NULL, 0, true};
	struct ctl_session s = {NULL, NULL};
	const char *name = NULL, *why = "";
	struct sbx_error err;
	bool json = false;
	int i, rc, status = EXIT_FAILURE;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (argv[i][0] == '-')
			return usage("bad option");
		else if (name != NULL)
			return usage("one sandbox NAME only");
		else
			name = argv[i];
	}
	if (name == NULL)
		return usage("a sandbox NAME is needed");
	if (!local_state_id_valid(name)) {
		fprintf(stderr,
			"sandboxctl: invalid sandbox name '%s': use 1 to %d "
			"letters, digits, '_' or '-'\n",
			name, LOCAL_ID_MAX);
		return EXIT_USAGE;
	}
	rc = has_agent(c, name, &why);
	if (rc < 0)
		return EXIT_FAILURE;
	if (rc > 0) {
		sbx_error_clear(&err);
		rc = ctl_session_open(c, 0, &s, &err);
		if (rc == 0)
			rc = ac_job_list(s.t, name, &l, &err);
		if (rc < 0) {
			fprintf(stderr, "sandboxctl: sandbox '%s': %s\n", name,
				err.reason);
			goto out;
		}
	} else if (!json) {
		fprintf(stderr, "sandboxctl: sandbox '%s' %s: it has no jobs\n",
			name, why);
	}
	status = json ? print_json(&l) : print_table(&l);
	if (!json && !l.complete)
		fprintf(stderr,
			"sandboxctl: the agent left its oldest jobs out to "
			"keep its answer under %lu MiB\n",
			PROTO_JOB_LIST_MAX_BYTES / (1024 * 1024));
out:
	proto_job_list_cleanup(&l);
	ctl_session_close(&s);
	return status;
}
