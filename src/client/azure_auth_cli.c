/* SPDX-License-Identifier: MIT */
/*
 * azure_auth_cli: the Azure CLI as a source of tokens (azure_auth.h,
 * source 4): `az account get-access-token --scope SCOPE -o json`, run with
 * fork and exec (no shell) and the chain's environment snapshot, its
 * output bounded and wiped, under a deadline.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/proto_azure.h"
#include "common/token.h"
#include "common/xalloc.h"
#include "client/azure_auth_i.h"
#include "client/child_output.h"

#define CLI_STDERR_MAX 4096

/* az on the snapshot's PATH (heap path), or NULL. */
static char *find_az(struct azure_auth *a)
{
	const char *path = azure_auth_env(a->env, "PATH");
	const char *p;

	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p != '\0';) {
		size_t n = strcspn(p, ":");
		char *cand;

		if (n > 0 && p[0] == '/') {
			cand = xasprintf("%.*s/az", (int)n, p);
			if (access(cand, X_OK) == 0)
				return cand;
			free(cand);
		}
		p += n;
		if (*p == ':')
			p++;
	}
	return NULL;
}

/* The first line of az's complaint, printable and bounded. */
static void first_line(const struct buf *b, char *out, size_t size)
{
	size_t i, o = 0;

	for (i = 0; i < b->len && o + 1 < size; i++) {
		unsigned char c = (unsigned char)b->data[i];

		if (c == '\n' && o > 0)
			break;
		if (c == '\n' || c == '\r')
			continue;
		out[o++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
	}
	out[o] = '\0';
}

/* az's command line: a token for the scope (and tenant), as JSON. */
static void cli_argv(const struct azure_auth *a, const char *az,
		     const char **argv)
{
	size_t argc = 0;

	argv[argc++] = az;
	argv[argc++] = "account";
	argv[argc++] = "get-access-token";
	argv[argc++] = "--scope";
	argv[argc++] = a->scope;
	if (a->tenant != NULL) {
		argv[argc++] = "--tenant";
		argv[argc++] = a->tenant;
	}
	argv[argc++] = "--output";
	argv[argc++] = "json";
	argv[argc] = NULL;
}

/*
 * Run argv with the snapshot's environment, its stdout into out and its
 * stderr into eb, within the CLI's deadline: 0 and *status; -ETIMEDOUT
 * (it was killed); -EFBIG (its answer is larger than out may hold, after
 * it ended). *ran is false when it could not even be started: pipe's or
 * fork's -errno, err says so.
 */
static int cli_run(struct azure_auth *a, const char *const *argv,
		   struct buf *out, struct buf *eb, int *status, bool *ran,
		   struct sbx_error *err)
{
	int outp[2] = {-1, -1}, errp[2] = {-1, -1};
	long long deadline = clock_mono_ms() + a->cli_ms;
	struct child_output co;
	pid_t pid;
	int rc;

	*ran = false;
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		rc = -errno;
		goto cannot;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto cannot;
	}
	if (pid == 0)
		child_exec(argv, a->env, outp[1], errp[1], true);
	*ran = true;
	close(outp[1]);
	close(errp[1]);
	outp[1] = errp[1] = -1;
	co = (struct child_output){{outp[0], errp[0]},
				   {out, eb},
				   {out->max, eb->max},
				   {false, false},
				   true};
	rc = child_output_drain(&co, deadline);
	if (rc == -ETIMEDOUT)
		kill(-pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	/* Past the bound, the answer is not one. */
	if (rc == 0 && co.over[0])
		rc = -EFBIG;
	goto out;
cannot:
	sbx_error_set(err, SBX_UNREACHABLE, NULL,
		      "azure: cannot run the Azure CLI: %s", strerror(-rc));
out:
	child_fds_close(outp, 2);
	child_fds_close(errp, 2);
	return rc;
}

int azure_auth_cli(struct azure_auth *a, struct proto_azure_token *tok,
		   bool *unavailable, struct sbx_error *err)
{
	struct buf out = BUF_INIT(AZURE_AUTH_MAX_ANSWER);
	struct buf eb = BUF_INIT(CLI_STDERR_MAX);
	const char *argv[10];
	const char *why = "";
	char line[256];
	int rc, status = 0;
	bool ran;
	char *az;

	*unavailable = false;
	az = find_az(a);
	if (az == NULL) {
		*unavailable = true;
		return sbx_error_fail(err, SBX_INVALID_INPUT, NULL, ENOKEY,
				      "azure: the Azure CLI (az) is not on "
				      "PATH");
	}
	cli_argv(a, az, argv);
	rc = cli_run(a, argv, &out, &eb, &status, &ran, err);
	if (!ran) {
		/* err says why it could not be started. */
	} else if (rc == -ETIMEDOUT) {
		sbx_error_set(err, SBX_UNREACHABLE, NULL,
			      "azure: the Azure CLI did not answer within "
			      "%ld ms",
			      a->cli_ms);
		rc = -EIO;
	} else if (rc < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		first_line(&eb, line, sizeof(line));
		rc = sbx_error_fail(err, SBX_COMMAND_FAILED,
				    AZURE_AUTH_FAIL_REFUSED, EACCES,
				    "azure: the Azure CLI gave no token (%s): "
				    "%s",
				    rc == -EFBIG ? "its answer is too large"
				    : WIFEXITED(status) ? "it failed"
							: "it was killed",
				    line[0] ? line : "no message");
	} else if (proto_azure_token_decode(out.data, out.len,
					    azure_auth_now_s(), tok,
					    &why) < 0) {
		sbx_error_set(err, SBX_UNEXPECTED_FORMAT, NULL,
			      "azure: the Azure CLI's token answer is "
			      "malformed: %s",
			      why);
		rc = -EIO;
	}
	if (out.data != NULL)
		token_wipe(out.data, out.len);
	buf_cleanup(&out);
	buf_cleanup(&eb);
	free(az);
	return rc;
}
