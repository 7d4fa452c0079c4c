/* SPDX-License-Identifier: MIT */
/*
 * provider_azure_native: native sessions of the Azure provider (a sandbox
 * without the agent label, provider.h): a file read through the data
 * plane's files route and a command through executeShellCommand, under
 * the provider's native root.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/xalloc.h"
#include "client/provider_azure_i.h"

/* native_root joined with a session path (relative, or absolute meaning
 * relative to the session root, as the agent takes it). */
static int native_path(struct azure_priv *ap, const char *rel, bool allow_root,
		       char **out, struct sbx_error *err)
{
	char norm[PATH_MAX_BYTES + 1];
	enum path_verdict v;

	v = path_normalize(rel, strlen(rel), allow_root, norm, sizeof(norm));
	if (v != PATH_OK)
		return sbx_error_fail(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED, EACCES,
				      "Path '%.256s' refused: %s", rel,
				      path_verdict_reason(v));
	if (norm[0] == '\0')
		*out = xstrdup(ap->native_root);
	else if (strcmp(ap->native_root, "/") == 0)
		*out = xasprintf("/%s", norm);
	else
		*out = xasprintf("%s/%s", ap->native_root, norm);
	return 0;
}

int azure_native_read(struct provider *p, const char *id, const char *path,
		      struct buf *out, struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct transport_resp resp;
	size_t max = PROTO_MAX_TRANSFER_BYTES;
	char *full = NULL;
	char what[128];
	int rc;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	rc = native_path(ap, path, false, &full, err);
	if (rc < 0)
		return rc;
	if (out->max != 0 && out->max - out->len < max)
		max = out->max - out->len;
	azure_count(ap, &ap->stats.native_reads);
	snprintf(what, sizeof(what), "read a file of sandbox '%s'", id);
	transport_resp_init(&resp);
	rc = azure_read_file(ap, id, full, max, what, &resp, err);
	if (rc == -ENOENT) {
		sbx_error_set(
			err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
			"%s returned 404 Not Found: " PROTO_ERR_PATH_NOT_FOUND
			": No such file in the sandbox: %.256s",
			TRANSPORT_OP_READ, path);
		err->err = ENOENT;
	} else if (rc == -EFBIG) {
		sbx_error_set(err, SBX_COMMAND_FAILED, SBX_FAIL_AGENT_REFUSED,
			      "%s: '%.256s' is over the %zu byte transfer "
			      "limit",
			      TRANSPORT_OP_READ, path, max);
		err->err = EFBIG;
	} else if (rc == 0) {
		rc = buf_append(out, resp.body.data ? resp.body.data : "",
				resp.body.len);
		if (rc < 0) {
			sbx_error_set(err, SBX_COMMAND_FAILED,
				      SBX_FAIL_AGENT_REFUSED,
				      "%s: '%.256s' does not fit",
				      TRANSPORT_OP_READ, path);
			err->err = -rc;
		}
	}
	transport_resp_cleanup(&resp);
	free(full);
	return rc;
}

int azure_native_exec(struct provider *p, const char *id, const char *command,
		      const char *cwd, struct provider_exec_result *res,
		      struct sbx_error *err)
{
	struct azure_priv *ap = azure_priv_of(p);
	struct transport_resp resp;
	struct proto_azure_exec ex;
	struct buf body = BUF_INIT(0);
	struct dp_req r;
	char what[128], path[128];
	const char *why = "";
	char *dir = NULL;
	int rc;

	if (!azure_id_valid(id))
		return azure_bad_id(id, err);
	rc = native_path(ap, cwd != NULL ? cwd : "", true, &dir, err);
	if (rc < 0)
		return rc;
	rc = proto_azure_exec_req_encode(command, dir, &body);
	free(dir);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: the command cannot be encoded");
		return rc;
	}
	azure_count(ap, &ap->stats.native_execs);
	snprintf(what, sizeof(what), "run a command in sandbox '%s'", id);
	snprintf(path, sizeof(path), "/sandboxes/%s/executeShellCommand", id);
	r = azure_dp_req(what, "POST", path, PROTO_HTTP_BODY_LIMIT,
			 PROVIDER_AZURE_EXEC_TIMEOUT_MS);
	azure_dp_json(&r, &body);
	r.json = true;
	r.may_run = true;
	transport_resp_init(&resp);
	rc = azure_dp_call(ap, &r, &resp, err);
	buf_cleanup(&body);
	if (rc < 0)
		goto out;
	proto_azure_exec_init(&ex, res->out.max, res->err.max);
	rc = proto_azure_exec_decode(resp.body.data, resp.body.len, &ex, &why);
	if (rc < 0) {
		sbx_error_set(err, SBX_OUTCOME_UNKNOWN, NULL,
			      "azure: %s: the data plane's answer is "
			      "malformed (%s); the command may have run",
			      what, why);
		proto_azure_exec_cleanup(&ex);
		rc = -EIO;
		goto out;
	}
	/* Output past the caller's bounds was dropped, as an agent's output
	 * cap drops it. */
	buf_cleanup(&res->out);
	buf_cleanup(&res->err);
	res->out = ex.out;
	res->err = ex.err;
	res->has_exit = ex.has_exit;
	res->exit_code = ex.exit_code;
out:
	transport_resp_cleanup(&resp);
	return rc;
}
