/* SPDX-License-Identifier: MIT */
/*
 * sandboxctl: the control tool of the local provider. It parses the
 * command line, calls local_ctl (which does all the work and is shared
 * with the mount) and prints the outcome. Nothing here touches the state
 * directory directly, and nothing here is needed by the tests, which call
 * the library.
 *
 * Exit status: 0 success, 1 an operation failed, 2 a usage error (exec
 * has its own, ctl.h).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/numarg.h"
#include "common/proto_record.h"
#include "common/strv.h"
#include "ctl/ctl.h"
#include "client/local_ctl.h"
#include "client/local_state.h"

#define EXIT_USAGE 2

static const char usage_text[] =
	"usage: sandboxctl [-v] [--state-dir DIR] COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  create NAME [--from DIR] [--native] [--user USER] [--strict-v1]\n"
	"         [--pids N] [--memory SIZE] [--tmp-size SIZE] "
	"[--network user|none]\n"
	"  start NAME\n"
	"  stop NAME\n"
	"  restart NAME\n"
	"  rm [-f|--force] NAME\n"
	"  ls [--json]\n"
	"  status NAME [--json]\n"
	"  exec NAME [--timeout SECONDS] [--cwd DIR] [--env K=V]... -- CMD "
	"[ARGS...]\n"
	"  jobs NAME [--json]\n"
	"\n"
	"options:\n"
	"  --state-dir DIR  the state directory (default: "
	"$SANDBOXFS_STATE_DIR,\n"
	"                   /var/lib/sandboxfs for root, else\n"
	"                   ${XDG_STATE_HOME:-$HOME/.local/state}/sandboxfs)\n"
	"  -v, --verbose    say more (twice: debug)\n"
	"  -h, --help       this text\n"
	"  -V, --version    the version\n";

static int __attribute__((format(printf, 1, 2)))
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sandboxctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'sandboxctl --help'.\n", stderr);
	return EXIT_USAGE;
}

static int fail(int rc, const struct local_err *err)
{
	if (err->msg[0] != '\0')
		fprintf(stderr, "sandboxctl: %s\n", err->msg);
	else
		fprintf(stderr, "sandboxctl: %s\n", strerror(-rc));
	return EXIT_FAILURE;
}

static const char *transport_name(const struct proto_record *r)
{
	switch (proto_record_transport(r)) {
	case PROTO_RECORD_AGENT:
		return "agent";
	case PROTO_RECORD_NATIVE:
		return "native";
	default:
		return "invalid";
	}
}

static const char *state_name(const struct proto_record *r)
{
	const char *s = proto_record_state_name(r->state);

	return s ? s : "?";
}

/* Parse "NAME" plus the options in longopts (flags returned through
 * the handler's switch in the caller). Returns the name or NULL after
 * printing a usage error into *rc. */
static const char *one_name(int argc, char **argv, int *rc)
{
	if (optind >= argc) {
		*rc = usage_error("%s: a sandbox NAME is needed", argv[0]);
		return NULL;
	}
	if (optind + 1 < argc) {
		*rc = usage_error("unexpected argument '%s'", argv[optind + 1]);
		return NULL;
	}
	if (!local_state_id_valid(argv[optind])) {
		fprintf(stderr,
			"sandboxctl: invalid sandbox name '%s': use 1 to %d "
			"letters, digits, '_' or '-'\n",
			argv[optind], LOCAL_ID_MAX);
		*rc = EXIT_USAGE;
		return NULL;
	}
	return argv[optind];
}

/* Reset getopt for a subcommand's own options. */
static void sub_getopt_reset(void)
{
	optind = 0;
	opterr = 1;
}

static int print_buf(struct buf *b)
{
	int rc = fwrite(b->data, 1, b->len, stdout) == b->len ? 0 : 1;

	buf_cleanup(b);
	return rc;
}

/* create's --pids (a number), --memory or --tmp-size (sizes) into o:
 * 0, or a usage error when it is not one. */
static int amount_arg(int opt, struct local_create_opts *o)
{
	uint64_t *field = opt == 'p'   ? &o->pids
			  : opt == 'm' ? &o->memory
				       : &o->tmp_size;
	const char *name = opt == 'p'	? "pids"
			   : opt == 'm' ? "memory"
					: "tmp-size";
	unsigned long long v;
	int rc = opt == 'p' ? numarg_uint(optarg, 1, 1ULL << 50, &v)
			    : numarg_size(optarg, 1, 1ULL << 50, &v);

	if (rc < 0)
		return usage_error("--%s: '%s' is not a %s", name, optarg,
				   opt == 'p' ? "number" : "size");
	*field = v;
	return 0;
}

static int cmd_create(struct local_ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"from", required_argument, NULL, 'f'},
		{"native", no_argument, NULL, 'n'},
		{"user", required_argument, NULL, 'u'},
		{"strict-v1", no_argument, NULL, 's'},
		{"pids", required_argument, NULL, 'p'},
		{"memory", required_argument, NULL, 'm'},
		{"tmp-size", required_argument, NULL, 't'},
		{"network", required_argument, NULL, 'N'},
		{NULL, 0, NULL, 0},
	};
	struct local_create_opts o;
	struct local_err err = {""};
	struct ctl_create_watch w;
	const char *name;
	int ch, rc = 0, st;

	memset(&o, 0, sizeof(o));
	sub_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			o.from = optarg;
			break;
		case 'p':
		case 'm':
		case 't':
			rc = amount_arg(ch, &o);
			if (rc != 0)
				return rc;
			break;
		case 'N':
			if (strcmp(optarg, "user") != 0 &&
			    strcmp(optarg, "none") != 0)
				return usage_error("--network: '%s' is not "
						   "user or none",
						   optarg);
			o.network = optarg;
			break;
		case 'n':
			o.native = true;
			break;
		case 'u':
			o.user = optarg;
			break;
		case 's':
			o.strict_v1 = true;
			break;
		default:
			return usage_error("%s: bad option", argv[0]);
		}
	}
	name = one_name(argc, argv, &rc);
	if (name == NULL)
		return rc;
	ctl_create_watch_start(&w, name);
	rc = local_ctl_create_progress(c, name, &o, ctl_create_watch_progress,
				       &w, &err);
	st = ctl_create_watch_finish(&w, rc);
	if (st >= 0)
		return st;
	if (rc < 0)
		return fail(rc, &err);
	printf("%s: created (%s)\n", name, o.native ? "native" : "agent");
	return 0;
}

/* After a start: where the sandbox now is. */
static void say_running(struct local_ctl *c, const char *name)
{
	struct local_err err = {""};
	struct proto_record rec;

	if (local_state_read(c->state_dir, name, &rec, &err) < 0) {
		printf("%s: running\n", name);
		return;
	}
	if (rec.agent_url != NULL)
		printf("%s: running at %s\n", name, rec.agent_url);
	else
		printf("%s: running (%s)\n", name, transport_name(&rec));
	proto_record_cleanup(&rec);
}

typedef int (*ctl_fn)(struct local_ctl *c, const char *id,
		      struct local_err *err);

static int cmd_simple(struct local_ctl *c, int argc, char **argv, ctl_fn fn,
		      bool started)
{
	static const struct option opts[] = {{NULL, 0, NULL, 0}};
	struct local_err err = {""};
	const char *name;
	int rc = 0;

	sub_getopt_reset();
	if (getopt_long(argc, argv, "", opts, NULL) != -1)
		return usage_error("%s: bad option", argv[0]);
	name = one_name(argc, argv, &rc);
	if (name == NULL)
		return rc;
	rc = fn(c, name, &err);
	if (rc < 0)
		return fail(rc, &err);
	if (started)
		say_running(c, name);
	else
		printf("%s: stopped\n", name);
	return 0;
}

static int cmd_rm(struct local_ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"force", no_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	struct local_err err = {""};
	const char *name;
	bool force = false;
	int ch, rc = 0;

	sub_getopt_reset();
	while ((ch = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		if (ch != 'f')
			return usage_error("%s: bad option", argv[0]);
		force = true;
	}
	name = one_name(argc, argv, &rc);
	if (name == NULL)
		return rc;
	rc = local_ctl_rm(c, name, force, &err);
	if (rc < 0)
		return fail(rc, &err);
	printf("%s: removed\n", name);
	return 0;
}

static bool json_flag(int argc, char **argv, bool *json)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int ch;

	*json = false;
	sub_getopt_reset();
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch != 'j')
			return false;
		*json = true;
	}
	return true;
}

static int cmd_ls(struct local_ctl *c, int argc, char **argv)
{
	struct proto_record *recs = NULL;
	struct buf out = BUF_INIT(0);
	size_t nids = 0, n = 0, i;
	int wname = 4, wstate = 5, wtrans = 9, rc, status = 0;
	char **ids = NULL;
	bool json, *died = NULL;

	if (!json_flag(argc, argv, &json))
		return usage_error("%s: bad option", argv[0]);
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	rc = local_state_list(c->state_dir, &ids, &nids);
	if (rc < 0) {
		fprintf(stderr, "sandboxctl: cannot list %s: %s\n",
			c->state_dir, strerror(-rc));
		return EXIT_FAILURE;
	}
	recs = calloc(nids ? nids : 1, sizeof(*recs));
	died = calloc(nids ? nids : 1, sizeof(*died));
	if (recs == NULL || died == NULL) {
		free(recs);
		free(died);
		strv_free(ids, nids);
		return EXIT_FAILURE;
	}
	for (i = 0; i < nids; i++) {
		struct local_err err = {""};

		rc = local_state_read(c->state_dir, ids[i], &recs[n], &err);
		if (rc == -ENOENT)
			continue; /* removed, or not created yet */
		if (rc < 0) {
			fprintf(stderr, "sandboxctl: %s\n", err.msg);
			status = EXIT_FAILURE;
			continue;
		}
		died[n] = local_ctl_agent_died(c, &recs[n]);
		if (died[n]) {
			/* Listed as the mount sees it: stopped. */
			recs[n].state = PROTO_RECORD_STOPPED;
			recs[n].agent_pid = 0;
			(void)!proto_record_set_str(&recs[n].agent_url, NULL);
		}
		n++;
	}
	if (json) {
		if (proto_record_encode_list(recs, n, &out) < 0 ||
		    print_buf(&out) != 0)
			status = EXIT_FAILURE;
		goto out;
	}
	for (i = 0; i < n; i++) {
		int l = (int)strlen(recs[i].id);

		wname = l > wname ? l : wname;
		l = (int)strlen(state_name(&recs[i]));
		wstate = l > wstate ? l : wstate;
	}
	printf("%-*s  %-*s  %-*s  %s\n", wname, "NAME", wstate, "STATE", wtrans,
	       "TRANSPORT", "URL");
	for (i = 0; i < n; i++)
		printf("%-*s  %-*s  %-*s  %s%s\n", wname, recs[i].id, wstate,
		       state_name(&recs[i]), wtrans, transport_name(&recs[i]),
		       recs[i].agent_url ? recs[i].agent_url : "-",
		       died[i] ? " (its agent died)" : "");
out:
	for (i = 0; i < n; i++)
		proto_record_cleanup(&recs[i]);
	free(recs);
	free(died);
	strv_free(ids, nids);
	return status;
}

static int cmd_status(struct local_ctl *c, int argc, char **argv)
{
	struct local_err err = {""};
	struct buf out = BUF_INIT(0);
	struct local_status s;
	const struct proto_record *r;
	const char *name;
	char *root;
	bool json;
	int rc = 0;

	if (!json_flag(argc, argv, &json))
		return usage_error("%s: bad option", argv[0]);
	name = one_name(argc, argv, &rc);
	if (name == NULL)
		return rc;
	rc = local_ctl_status(c, name, &s, &err);
	if (rc < 0)
		return fail(rc, &err);
	r = &s.rec;
	if (json) {
		if (s.died) {
			/* As the mount sees it; agentAlive says why. */
			s.rec.state = PROTO_RECORD_STOPPED;
			s.rec.agent_pid = 0;
			(void)!proto_record_set_str(&s.rec.agent_url, NULL);
		}
		rc = proto_record_encode_status(
			r, s.alive, s.answered ? &s.health : NULL, &out);
		rc = rc < 0 ? EXIT_FAILURE : print_buf(&out);
		local_status_cleanup(&s);
		return rc;
	}
	root = local_state_path(c->state_dir, name, LOCAL_PATH_ROOT);
	printf("name:       %s\n", r->id);
	if (s.died)
		printf("state:      Stopped (its agent died; the next access "
		       "through a mount, or start, starts it again)\n");
	else
		printf("state:      %s\n", state_name(r));
	printf("transport:  %s\n", transport_name(r));
	printf("url:        %s\n",
	       r->agent_url && !s.died ? r->agent_url : "-");
	if (proto_record_transport(r) == PROTO_RECORD_NATIVE)
		printf("agent:      none (native session)\n");
	else if (s.alive && s.pid > 0)
		printf("agent:      pid %ld, alive\n", (long)s.pid);
	else if (s.alive)
		printf("agent:      alive\n");
	else if (s.died && s.pid > 0)
		printf("agent:      pid %ld, died\n", (long)s.pid);
	else
		printf("agent:      not running\n");
	if (s.answered)
		printf("health:     %s (boot %s)\n",
		       s.health.status[0] ? s.health.status : "answered",
		       s.health.boot_id[0] ? s.health.boot_id : "-");
	else
		printf("health:     %s\n",
		       r->agent_url && !s.died ? "no answer" : "-");
	printf("boots:      %llu\n", (unsigned long long)r->boot_count);
	if (r->exec_user != NULL)
		printf("exec user:  %s (%ld:%ld)\n", r->exec_user, r->exec_uid,
		       r->exec_gid);
	else if (r->dynamic_user)
		printf("exec user:  its own (%ld:%ld)\n", r->exec_uid,
		       r->exec_gid);
	if (r->pids > 0 || r->memory > 0 || r->tmp_size > 0)
		printf("limits:     pids %llu, memory %llu, tmp-size %llu\n",
		       (unsigned long long)r->pids,
		       (unsigned long long)r->memory,
		       (unsigned long long)r->tmp_size);
	if (r->network != NULL)
		printf("network:    %s\n", r->network);
	printf("root:       %s\n", root);
	printf("created:    %s\n", r->created_at ? r->created_at : "-");
	printf("started:    %s\n", r->started_at ? r->started_at : "-");
	free(root);
	local_status_cleanup(&s);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"state-dir", required_argument, NULL, 's'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct local_err err = {""};
	const char *state_dir = NULL, *cmd;
	struct local_ctl c;
	int ch, verbose = 0, rc, sub_argc;
	char **sub_argv;

	/* Notices (a state directory made owner-only) are shown. */
	log_init("sandboxctl", LOG_LEVEL_NOTICE);
	/* '+': stop at the command; its options are its own. */
	while ((ch = getopt_long(argc, argv, "+vhV", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			state_dir = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("sandboxctl %s\n", PACKAGE_VERSION);
			return 0;
		default:
			fputs("Try 'sandboxctl --help'.\n", stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	log_set_level(verbose >= 2   ? LOG_LEVEL_DEBUG
		      : verbose == 1 ? LOG_LEVEL_INFO
				     : LOG_LEVEL_NOTICE);
	cmd = argv[optind];
	sub_argc = argc - optind;
	sub_argv = argv + optind;
	if (strcmp(cmd, "create") != 0 && strcmp(cmd, "start") != 0 &&
	    strcmp(cmd, "stop") != 0 && strcmp(cmd, "restart") != 0 &&
	    strcmp(cmd, "rm") != 0 && strcmp(cmd, "ls") != 0 &&
	    strcmp(cmd, "status") != 0 && strcmp(cmd, "exec") != 0 &&
	    strcmp(cmd, "jobs") != 0)
		return usage_error("unknown command '%s'", cmd);
	rc = local_ctl_init(&c, state_dir, &err);
	if (rc < 0) {
		rc = fail(rc, &err);
		return strcmp(cmd, "exec") == 0 ? CTL_EXEC_NOT_STARTED : rc;
	}
	if (strcmp(cmd, "create") == 0)
		rc = cmd_create(&c, sub_argc, sub_argv);
	else if (strcmp(cmd, "start") == 0)
		rc = cmd_simple(&c, sub_argc, sub_argv, local_ctl_start, true);
	else if (strcmp(cmd, "stop") == 0)
		rc = cmd_simple(&c, sub_argc, sub_argv, local_ctl_stop, false);
	else if (strcmp(cmd, "restart") == 0)
		rc = cmd_simple(&c, sub_argc, sub_argv, local_ctl_restart,
				true);
	else if (strcmp(cmd, "rm") == 0)
		rc = cmd_rm(&c, sub_argc, sub_argv);
	else if (strcmp(cmd, "ls") == 0)
		rc = cmd_ls(&c, sub_argc, sub_argv);
	else if (strcmp(cmd, "exec") == 0)
		rc = cmd_exec(&c, sub_argc, sub_argv);
	else if (strcmp(cmd, "jobs") == 0)
		rc = cmd_jobs(&c, sub_argc, sub_argv);
	else
		rc = cmd_status(&c, sub_argc, sub_argv);
	local_ctl_cleanup(&c);
	if (fflush(stdout) != 0 && rc == 0)
		rc = EXIT_FAILURE;
	return rc;
}
