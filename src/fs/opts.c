/* SPDX-License-Identifier: MIT */
/*
 * opts: sandboxfs's -o options (sandboxfs(1) lists each one; a check in
 * `make check` keeps the two in step).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_lowlevel.h>

#include "common/xalloc.h"
#include "fs/fs.h"

enum {
	KEY_DISCARD,
};

/* Raw option values; numbers are parsed after fuse_opt. */
struct raw {
	char *timeout;
	char *connect_timeout;
	char *attr_timeout;
	char *entry_timeout;
	char *negative_timeout;
	char *cache_timeout;
	int noevents;
	char *job_timeout;
	char *list_cache;
	char *write_window;
	char *symlinks;
	int noautoresume;
	int ro;
	int shared_exec;
	int allow_other;
	int default_permissions;
	int has_fsname;
	int has_subtype;
	int show_help;
	int show_version;
	unsigned npositional;
	char *positional[2];
};

#define SOPT(t, p)                                  \
	{                                           \
		t, offsetof(struct sbfs_opts, p), 1 \
	}
#define ROPT(t, p)                            \
	{                                     \
		t, offsetof(struct raw, p), 1 \
	}
/* An option that is ours to note and the kernel's too: libfuse applies
 * every template an option matches, so the note (ROPT) and the keeping
 * in the arguments (FUSE_OPT_KEY_KEEP) are two entries. */
#define ROPT_KEEP(t, p) ROPT(t, p), FUSE_OPT_KEY(t, FUSE_OPT_KEY_KEEP)

static const struct fuse_opt sbfs_opt_spec[] = {
	SOPT("provider=%s", prov.name),
	SOPT("state_dir=%s", prov.state_dir),
	SOPT("log=%s", log_file),
	SOPT("azure_subscription=%s", prov.azure_subscription),
	SOPT("azure_resource_group=%s", prov.azure_resource_group),
	SOPT("azure_group=%s", prov.azure_group),
	SOPT("azure_region=%s", prov.azure_region),
	SOPT("azure_endpoint=%s", prov.azure_endpoint),
	SOPT("azure_token_path=%s", prov.azure_token_path),
	SOPT("azure_config=%s", prov.azure_config),
	SOPT("azure_ca_file=%s", prov.azure_ca_file),
	SOPT("azure_resolve=%s", prov.azure_resolve),
	SOPT("azure_record_cache=%s", prov.azure_record_cache),
	FUSE_OPT_END};

static const struct fuse_opt raw_opt_spec[] = {
	ROPT("timeout=%s", timeout),
	ROPT("connect_timeout=%s", connect_timeout),
	ROPT("attr_timeout=%s", attr_timeout),
	ROPT("entry_timeout=%s", entry_timeout),
	ROPT("negative_timeout=%s", negative_timeout),
	ROPT("cache_timeout=%s", cache_timeout), ROPT("noevents", noevents),
	ROPT("job_timeout=%s", job_timeout), ROPT("list_cache=%s", list_cache),
	ROPT("write_window=%s", write_window), ROPT("symlinks=%s", symlinks),
	ROPT("shared_exec", shared_exec),
	/* Ours to know, and the kernel's too. */
	ROPT_KEEP("allow_other", allow_other),
	ROPT_KEEP("default_permissions", default_permissions),
	ROPT_KEEP("fsname=", has_fsname), ROPT_KEEP("subtype=", has_subtype),
	ROPT_KEEP("ro", ro),
	/* A sandbox's set-id programs and device nodes are never honoured
	 * on the host (SEMANTICS.md): nosuid and nodev are always in force,
	 * and mount(8)'s default suid and dev are dropped. */
	FUSE_OPT_KEY("suid", KEY_DISCARD), FUSE_OPT_KEY("dev", KEY_DISCARD),
	ROPT("noautoresume", noautoresume), ROPT("-h", show_help),
	ROPT("--help", show_help), ROPT("-V", show_version),
	ROPT("--version", show_version),
	/* fstab options that mean nothing to a FUSE file system */
	FUSE_OPT_KEY("_netdev", KEY_DISCARD),
	FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD), FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_DISCARD), FUSE_OPT_KEY("users", KEY_DISCARD),
	FUSE_OPT_KEY("defaults", KEY_DISCARD), FUSE_OPT_KEY("x-", KEY_DISCARD),
	FUSE_OPT_END};

static int raw_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct raw *r = data;

	(void)outargs;
	switch (key) {
	case KEY_DISCARD:
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (r->npositional >= 2) {
			fprintf(stderr, "sandboxfs: too many arguments: %s\n",
				arg);
			return -1;
		}
		r->positional[r->npositional++] = xstrdup(arg);
		return 0;
	default:
		if (strncmp(arg, "x-", 2) == 0)
			return 0;
		return 1;
	}
}

/*
 * fstab's first field, as mount.fuse3 passes it: "local:DIR" (the local
 * provider, its state directory), "local", "azure" or "sandboxfs" (the
 * defaults and the -o options decide). -o options win over the source.
 */
static int source_parse(const char *src, struct sbfs_opts *o)
{
	const char *colon = strchr(src, ':');
	size_t n = colon ? (size_t)(colon - src) : strlen(src);

	if (n == 9 && strncmp(src, "sandboxfs", 9) == 0 && colon == NULL)
		return 0;
	if ((n == 5 && strncmp(src, "local", 5) == 0) ||
	    (n == 5 && strncmp(src, "azure", 5) == 0 && colon == NULL)) {
		if (o->prov.name == NULL)
			o->prov.name = xstrndup(src, n);
		if (colon != NULL && colon[1] != '\0' &&
		    o->prov.state_dir == NULL)
			o->prov.state_dir = xstrdup(colon + 1);
		return 0;
	}
	fprintf(stderr,
		"sandboxfs: %s: not a source sandboxfs knows (local:DIR, "
		"local, azure or sandboxfs)\n",
		src);
	return -1;
}

static int seconds(const char *name, const char *v, double *out, bool integer)
{
	char *end = NULL;
	double d;

	if (v == NULL)
		return 0;
	errno = 0;
	d = strtod(v, &end);
	if (errno != 0 || end == v || *end != '\0' || d < 0 || d > 1e9 ||
	    (integer && d != (double)(long)d)) {
		fprintf(stderr,
			"sandboxfs: -o %s=%s: not a number of seconds\n", name,
			v);
		return -1;
	}
	*out = d;
	return 0;
}

static void sbfs_usage(const char *prog)
{
	printf("usage: %s [-f] [-d] [-o OPTION[,OPTION...]] MOUNTPOINT\n"
	       "\n"
	       "Mounts a provider's sandboxes: MOUNTPOINT/<sandbox>/files/ is "
	       "a\n"
	       "sandbox's file tree; write a command to "
	       "MOUNTPOINT/<sandbox>/exec\n"
	       "to start a job (see sandboxfs(1)).\n"
	       "\n"
	       "sandboxfs options:\n"
	       "    -o provider=NAME        local (default) or azure\n"
	       "    -o state_dir=DIR        the local provider's state "
	       "directory\n"
	       "    -o log=FILE             log to FILE (appended) instead "
	       "of syslog\n"
	       "                            or standard error\n"
	       "    -o timeout=SECONDS      wait for an agent's answer "
	       "(default 60)\n"
	       "    -o connect_timeout=SECONDS  connect deadline (default 10)\n"
	       "    -o attr_timeout=SECONDS     attribute cache (default 1)\n"
	       "    -o entry_timeout=SECONDS    name cache (default 1)\n"
	       "    -o negative_timeout=SECONDS missing-name cache (default "
	       "1)\n"
	       "    -o cache_timeout=SECONDS    the three caches above for a "
	       "sandbox\n"
	       "                            whose agent tells its changes "
	       "(default 300)\n"
	       "    -o noevents             do not follow change events: "
	       "always the\n"
	       "                            timeouts above\n"
	       "    -o job_timeout=SECONDS  a job's time limit when its "
	       "command\n"
	       "                            sets none (default 86400)\n"
	       "    -o list_cache=SECONDS   reuse the sandbox list (default "
	       "1)\n"
	       "    -o write_window=SECONDS longest a written byte waits in "
	       "the\n"
	       "                            mount before it is sent "
	       "(default 1)\n"
	       "    -o symlinks=transform|raw  show a link that leads out "
	       "of its\n"
	       "                            sandbox rewritten to stay "
	       "inside (default),\n"
	       "                            or as stored\n"
	       "    -o shared_exec          with allow_other: let every "
	       "user who may\n"
	       "                            use the mount start and cancel "
	       "jobs\n"
	       "    -o noautoresume         do not resume stopped sandboxes\n"
	       "    -o ro                   read-only mount\n"
	       "    -o azure_subscription=ID,azure_resource_group=RG,\n"
	       "       azure_group=NAME,azure_region=REGION  the Azure "
	       "sandbox group\n"
	       "    -o azure_config=FILE    read the azure_* settings from a "
	       "file\n"
	       "    -o azure_token_path=PATH  the agent credential's path in "
	       "a sandbox\n"
	       "    -o azure_endpoint=URL   data-plane base URL override\n"
	       "    -o azure_ca_file=FILE   extra trusted CA certificates\n"
	       "    -o azure_resolve=HOST:PORT:ADDR[,...]  pin name "
	       "resolution\n"
	       "    -o azure_record_cache=SECONDS  reuse a record in listings "
	       "(default 2)\n"
	       "\n"
	       "FUSE options (libfuse's; sandboxfs's defaults):\n"
	       "    -h, --help              this text\n"
	       "    -V, --version           the version\n"
	       "    -f                      stay in the foreground, log to "
	       "standard error\n"
	       "    -d, -o debug            trace every request (implies "
	       "-f)\n"
	       "    -s                      serve one request at a time\n"
	       "    -o allow_other          let other users use the mount "
	       "(implies\n"
	       "                            default_permissions)\n"
	       "    -o allow_root           let root use the mount too\n"
	       "    -o default_permissions  the kernel checks modes against "
	       "the caller\n"
	       "    -o auto_unmount         unmount when sandboxfs exits\n"
	       "    -o max_threads=N        requests served at once (default "
	       "64)\n"
	       "    -o max_idle_threads=N   idle worker threads kept\n"
	       "    -o clone_fd             a FUSE descriptor per thread\n"
	       "    -o fsname=NAME          the source mount(8) shows "
	       "(default\n"
	       "                            local:STATE_DIR)\n"
	       "    -o subtype=NAME         the type mount(8) shows (default "
	       "sandboxfs)\n"
	       "nosuid and nodev are always in force.\n",
	       prog);
}

/* -o NAME=SECONDS of at least one second: *s holds the default and
 * receives the value. */
static int whole_seconds(const char *name, const char *text, long *s)
{
	double d = (double)*s;

	if (seconds(name, text, &d, true) < 0)
		return -1;
	if (d < 1) {
		fprintf(stderr, "sandboxfs: -o %s must be at least 1 second\n",
			name);
		return -1;
	}
	*s = (long)d;
	return 0;
}

/* -o NAME=SECONDS into milliseconds: *ms holds the default. */
static int millis(const char *name, const char *text, long *ms)
{
	double d = (double)*ms / 1000.0;

	if (seconds(name, text, &d, false) < 0)
		return -1;
	*ms = (long)(d * 1000.0);
	return 0;
}

/* The options that are times, checked (a message says what is wrong). */
static int take_times(const struct raw *r, struct sbfs_opts *o)
{
	if (whole_seconds("timeout", r->timeout, &o->timeout_s) < 0 ||
	    whole_seconds("connect_timeout", r->connect_timeout,
			  &o->connect_timeout_s) < 0 ||
	    seconds("attr_timeout", r->attr_timeout, &o->attr_timeout, false) <
		    0 ||
	    seconds("entry_timeout", r->entry_timeout, &o->entry_timeout,
		    false) < 0 ||
	    seconds("negative_timeout", r->negative_timeout,
		    &o->negative_timeout, false) < 0 ||
	    seconds("cache_timeout", r->cache_timeout, &o->cache_timeout,
		    false) < 0 ||
	    whole_seconds("job_timeout", r->job_timeout, &o->job_timeout_s) <
		    0 ||
	    millis("list_cache", r->list_cache, &o->list_cache_ms) < 0 ||
	    millis("write_window", r->write_window, &o->write_window_ms) < 0)
		return -1;
	o->prov.connect_timeout_ms = o->connect_timeout_s * 1000;
	return 0;
}

/* What a mount without -o options has (man/sandboxfs.1). */
static const struct sbfs_opts opts_defaults = {
	.timeout_s = 60,
	.connect_timeout_s = 10,
	.attr_timeout = 1.0,
	.entry_timeout = 1.0,
	.negative_timeout = 1.0,
	.cache_timeout = 300.0,
	.job_timeout_s = 86400,
	.list_cache_ms = 1000,
	.write_window_ms = 1000,
};

int sbfs_opts_parse(struct fuse_args *args, struct sbfs_opts *o)
{
	struct raw r;
	int rc = -1;

	*o = opts_defaults;
	memset(&r, 0, sizeof(r));
	if (fuse_opt_parse(args, o, sbfs_opt_spec, NULL) < 0 ||
	    fuse_opt_parse(args, &r, raw_opt_spec, raw_proc) < 0)
		goto out;
	if (r.show_help) {
		sbfs_usage(args->argv[0]);
		rc = 1;
		goto out;
	}
	if (r.show_version) {
		printf("sandboxfs %s\n", PACKAGE_VERSION);
		printf("FUSE library version %s\n", fuse_pkgversion());
		rc = 1;
		goto out;
	}
	o->noautoresume = r.noautoresume != 0;
	o->ro = r.ro != 0;
	o->noevents = r.noevents != 0;
	o->shared_exec = r.shared_exec != 0;
	if (take_times(&r, o) < 0)
		goto bad;
	if (r.symlinks == NULL || strcmp(r.symlinks, "transform") == 0) {
		o->raw_symlinks = false;
	} else if (strcmp(r.symlinks, "raw") == 0) {
		o->raw_symlinks = true;
	} else {
		fprintf(stderr,
			"sandboxfs: -o symlinks=%s: transform or raw, please\n",
			r.symlinks);
		goto bad;
	}
	if (r.npositional == 0) {
		fprintf(stderr, "sandboxfs: no mountpoint given (see "
				"sandboxfs --help)\n");
		goto bad;
	}
	/* mount.fuse3 passes "SOURCE MOUNTPOINT" (fstab's first field). */
	if (r.npositional == 2 && source_parse(r.positional[0], o) < 0)
		goto bad;
	/* Other users see only what the kernel lets them: their access is
	 * checked against the modes shown (SEMANTICS.md, sharing). */
	if (r.allow_other && !r.default_permissions &&
	    fuse_opt_add_arg(args, "-odefault_permissions") < 0)
		goto out;
	if (fuse_opt_add_arg(args, "-onosuid,nodev") < 0 ||
	    (!r.has_subtype &&
	     fuse_opt_add_arg(args, "-osubtype=sandboxfs") < 0))
		goto out;
	o->has_fsname = r.has_fsname != 0;
	if (fuse_opt_add_arg(args, r.positional[r.npositional - 1]) < 0)
		goto out;
	rc = 0;
	goto out;
bad:
	rc = -1;
out:
	free(r.timeout);
	free(r.connect_timeout);
	free(r.attr_timeout);
	free(r.entry_timeout);
	free(r.negative_timeout);
	free(r.cache_timeout);
	free(r.job_timeout);
	free(r.list_cache);
	free(r.write_window);
	free(r.symlinks);
	free(r.positional[0]);
	free(r.positional[1]);
	return rc;
}

void sbfs_opts_cleanup(struct sbfs_opts *o)
{
	provider_opts_cleanup(&o->prov);
	free(o->log_file);
	memset(o, 0, sizeof(*o));
}
