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
	KEY_HELP,
	KEY_VERSION,
	KEY_RO,
	KEY_DISCARD,
	KEY_TIMEOUT_ALL,
};

/* Raw option values; numbers are parsed after fuse_opt. */
struct raw {
	char *timeout;
	char *connect_timeout;
	char *attr_timeout;
	char *entry_timeout;
	char *negative_timeout;
	char *job_timeout;
	char *list_cache;
	int noautoresume;
	int ro;
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

static const struct fuse_opt sbfs_opt_spec[] = {
	SOPT("provider=%s", provider),
	SOPT("state_dir=%s", state_dir),
	SOPT("azure_subscription=%s", azure_subscription),
	SOPT("azure_resource_group=%s", azure_resource_group),
	SOPT("azure_group=%s", azure_group),
	SOPT("azure_region=%s", azure_region),
	SOPT("azure_endpoint=%s", azure_endpoint),
	SOPT("azure_token_path=%s", azure_token_path),
	SOPT("azure_config=%s", azure_config),
	SOPT("azure_ca_file=%s", azure_ca_file),
	SOPT("azure_resolve=%s", azure_resolve),
	SOPT("azure_record_cache=%s", azure_record_cache),
	FUSE_OPT_END};

static const struct fuse_opt raw_opt_spec[] = {
	ROPT("timeout=%s", timeout),
	ROPT("connect_timeout=%s", connect_timeout),
	ROPT("attr_timeout=%s", attr_timeout),
	ROPT("entry_timeout=%s", entry_timeout),
	ROPT("negative_timeout=%s", negative_timeout),
	ROPT("job_timeout=%s", job_timeout), ROPT("list_cache=%s", list_cache),
	ROPT("noautoresume", noautoresume), FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("-h", KEY_HELP), FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION), FUSE_OPT_KEY("--version", KEY_VERSION),
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
	case KEY_HELP:
		r->show_help = 1;
		return 0;
	case KEY_VERSION:
		r->show_version = 1;
		return 0;
	case KEY_RO:
		/* Ours, and the kernel's too: keep it in the arguments. */
		r->ro = 1;
		return 1;
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

void sbfs_usage(const char *prog)
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
	       "    -o timeout=SECONDS      wait for an agent's answer "
	       "(default 60)\n"
	       "    -o connect_timeout=SECONDS  connect deadline (default 10)\n"
	       "    -o attr_timeout=SECONDS     attribute cache (default 1)\n"
	       "    -o entry_timeout=SECONDS    name cache (default 1)\n"
	       "    -o negative_timeout=SECONDS missing-name cache (default "
	       "1)\n"
	       "    -o job_timeout=SECONDS  a job's time limit when its "
	       "command\n"
	       "                            sets none (default 86400)\n"
	       "    -o list_cache=SECONDS   reuse the sandbox list (default "
	       "1)\n"
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
	       "FUSE options:\n",
	       prog);
	fuse_cmdline_help();
	fuse_lib_help(NULL);
}

int sbfs_opts_parse(struct fuse_args *args, struct sbfs_opts *o)
{
	struct raw r;
	double d;
	int rc = -1;

	memset(o, 0, sizeof(*o));
	memset(&r, 0, sizeof(r));
	o->timeout_s = 60;
	o->connect_timeout_s = 10;
	o->attr_timeout = 1.0;
	o->entry_timeout = 1.0;
	o->negative_timeout = 1.0;
	o->job_timeout_s = 86400;
	o->list_cache_ms = 1000;
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
	d = (double)o->timeout_s;
	if (seconds("timeout", r.timeout, &d, true) < 0)
		goto bad;
	if (d < 1) {
		fprintf(stderr, "sandboxfs: -o timeout must be at least 1 "
				"second\n");
		goto bad;
	}
	o->timeout_s = (long)d;
	d = (double)o->connect_timeout_s;
	if (seconds("connect_timeout", r.connect_timeout, &d, true) < 0)
		goto bad;
	if (d < 1) {
		fprintf(stderr, "sandboxfs: -o connect_timeout must be at "
				"least 1 second\n");
		goto bad;
	}
	o->connect_timeout_s = (long)d;
	if (seconds("attr_timeout", r.attr_timeout, &o->attr_timeout, false) <
		    0 ||
	    seconds("entry_timeout", r.entry_timeout, &o->entry_timeout,
		    false) < 0 ||
	    seconds("negative_timeout", r.negative_timeout,
		    &o->negative_timeout, false) < 0)
		goto bad;
	d = (double)o->job_timeout_s;
	if (seconds("job_timeout", r.job_timeout, &d, true) < 0)
		goto bad;
	if (d < 1) {
		fprintf(stderr, "sandboxfs: -o job_timeout must be at least 1 "
				"second\n");
		goto bad;
	}
	o->job_timeout_s = (long)d;
	d = (double)o->list_cache_ms / 1000.0;
	if (seconds("list_cache", r.list_cache, &d, false) < 0)
		goto bad;
	o->list_cache_ms = (long)(d * 1000.0);
	/* mount.fuse3 passes "SOURCE MOUNTPOINT": the source names nothing
	 * here (the provider options do). */
	if (r.npositional == 0) {
		fprintf(stderr, "sandboxfs: no mountpoint given (see "
				"sandboxfs --help)\n");
		goto out;
	}
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
	free(r.job_timeout);
	free(r.list_cache);
	free(r.positional[0]);
	free(r.positional[1]);
	return rc;
}

void sbfs_opts_cleanup(struct sbfs_opts *o)
{
	free(o->provider);
	free(o->state_dir);
	free(o->azure_subscription);
	free(o->azure_resource_group);
	free(o->azure_group);
	free(o->azure_region);
	free(o->azure_endpoint);
	free(o->azure_token_path);
	free(o->azure_config);
	free(o->azure_ca_file);
	free(o->azure_resolve);
	free(o->azure_record_cache);
	memset(o, 0, sizeof(*o));
}
