/* SPDX-License-Identifier: MIT */
/*
 * The suite "azure_auth": every credential source of azure_auth against
 * the fake Azure's token endpoints (client secret, workload identity,
 * managed identity, the instance metadata service, the Azure CLI), the
 * token cache, and errors that are clear and carry no secret.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/agent_client.h"
#include "client/azure_auth.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/xalloc.h"
#include "client/provider_azure.h"
#include "tests/azure_fake.h"
#include "tests/azure_helpers.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"
#include "tests/stub_agent.h"
#include "tests/transport_helpers.h"
#include "client/transport.h"

/* A provider over the fake whose credential chain reads envp (the fake's
 * CA trusted, no record reused), kept in e->prov, and one list() through
 * it: its rc, err filled. */
static int env_list(struct az_env *e, const char *const *envp,
		    struct sbx_error *err)
{
	e->prov =
		az_env_provider_with(e, -1, envp, azure_fake_ca_file(e->fake));
	return az_list(e->prov, err);
}

START_TEST(tokens_are_cached_until_five_minutes_before_expiry)
{
	struct provider *p;
	struct az_env e;

	p = az_env_box(&e, 0);
	az_read_record(p, ID);
	az_read_record(p, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 1);
	provider_free(p);
	/* A token that ends within the margin serves its call only. */
	azure_fake_set_token_lifetime(e.fake, AZURE_AUTH_MARGIN_S - 10);
	e.prov = az_env_provider_with(&e, 0, az_secret_env(&e),
				      azure_fake_ca_file(e.fake));
	az_read_record(e.prov, ID);
	az_read_record(e.prov, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 3);

	/* A refresh that fails keeps the still-valid token: the call goes
	 * through with it, and the next refresh waits a while. */
	azure_fake_fail(e.fake, AZF_TOKEN, 5, 503, "application/json",
			"{\"error\":\"temporarily_unavailable\"}", NULL);
	az_read_record(e.prov, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 4);
	az_read_record(e.prov, ID);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 4);
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	az_env_stop(&e);
}
END_TEST

START_TEST(token_endpoint_errors_are_clear_and_carry_no_secret)
{
	static const struct {
		int status;
		const char *ctype, *body, *headers;
		enum sbx_code code;
		const char *needle;
	} rows[] = {
		{500, "application/json",
		 "{\"error\":\"temporarily_unavailable\",\"error_description\":"
		 "\"AADSTS50001: try later\"}",
		 NULL, SBX_UNREACHABLE,
		 "HTTP 500 temporarily_unavailable: AADSTS50001: try later"},
		{200, "text/html", "<html>", NULL, SBX_UNEXPECTED_FORMAT,
		 "content type 'text/html'"},
		{200, "application/json", "{\"access_token\":\"aad.1.x\"}",
		 NULL, SBX_UNEXPECTED_FORMAT,
		 "malformed: it carries no expiry"},
		{302, NULL, NULL, "Location: https://evil.example/\r\n",
		 SBX_UNEXPECTED_FORMAT, "redirect"},
		{400, "application/json",
		 "{\"error\":\"invalid_request\",\"error_description\":"
		 "\"echo fake~client.secret-Qw3rty\"}",
		 NULL, SBX_COMMAND_FAILED, "invalid_request: echo ****"},
	};
	const char *wrong[7];
	struct sbx_error err;
	struct provider *p;
	struct az_env e;
	size_t i;

	az_env_start(&e);
	p = az_env_provider(&e, -1);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		azure_fake_fail(e.fake, AZF_TOKEN, 1, rows[i].status,
				rows[i].ctype, rows[i].body, rows[i].headers);
		sbx_error_clear(&err);
		ck_assert_int_lt(az_list(p, &err), 0);
		ck_assert_msg(err.code == rows[i].code, "row %zu: %s", i,
			      err.reason);
		ck_assert_msg(strstr(err.reason, rows[i].needle) != NULL,
			      "row %zu: %s", i, err.reason);
		ck_assert_ptr_nonnull(strstr(err.reason, "client secret"));
		az_assert_clean(&err);
	}
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 0);

	/* A wrong secret: refused, said clearly, not repeated. */
	az_secret_envp(wrong, e.authority);
	wrong[2] = "AZURE_CLIENT_SECRET=not-the-secret-4711";
	provider_free(p);
	ck_assert_int_eq(env_list(&e, wrong, &err), -EACCES);
	ck_assert_str_eq(err.failure, "azureAuthRefused");
	ck_assert_int_eq(sbx_error_errno(&err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "invalid_client: "
						 "AADSTS7000215"));
	ck_assert_ptr_null(strstr(err.reason, "not-the-secret-4711"));
	az_assert_clean(&err);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 0);
	az_env_stop(&e);
}
END_TEST

START_TEST(workload_identity_posts_the_federated_assertion)
{
	const char *envp[7];
	char form[2048], fedvar[512];
	struct sbx_error err;
	struct az_env e;
	char *file;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	file = az_write_temp(e.dir, "federated", AZURE_FAKE_ASSERTION "\n");
	snprintf(fedvar, sizeof(fedvar), "AZURE_FEDERATED_TOKEN_FILE=%s", file);
	/* The client-secret environment with the token file for the secret. */
	az_secret_envp(envp, e.authority);
	envp[2] = fedvar;
	ck_assert_int_eq(env_list(&e, envp, &err), 0);
	azure_fake_last_token_form(e.fake, form, sizeof(form));
	ck_assert_ptr_nonnull(strstr(form, "client_assertion_type=urn%3Aietf%3A"
					   "params%3Aoauth%3Aclient-assertion-"
					   "type%3Ajwt-bearer"));
	ck_assert_ptr_nonnull(
		strstr(form, "client_assertion=" AZURE_FAKE_ASSERTION "&"));
	ck_assert_ptr_nonnull(strstr(form, "scope=https%3A%2F%2Fdynamicsessions"
					   ".io%2F.default"));
	ck_assert_ptr_null(strstr(form, "client_secret"));
	provider_free(e.prov);

	/* The file is re-read on every fetch: a rotated (here wrong) one
	 * is what goes out. */
	th_write_file(file, "eyJub3QiOiJpdCJ9.e30.x", 22);
	ck_assert_int_eq(env_list(&e, envp, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "AADSTS700211"));
	ck_assert_ptr_nonnull(strstr(err.reason, "workload identity"));
	az_assert_clean(&err);
	provider_free(e.prov);
	unlink(file);
	ck_assert_int_eq(env_list(&e, envp, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "cannot be read"));
	free(file);
	az_env_stop(&e);
}
END_TEST

struct identity {
	pthread_mutex_t mu;
	unsigned calls;
	bool header_ok;
	char target[2048];
	const char *path; /* the route served */
	const char *header; /* a header line that must be there */
	int status; /* 200: a token */
	char token[64];
};

static bool has_header(const struct stub_req *req, const char *line)
{
	const char *h = req->headers;
	size_t n = strlen(line);

	for (; h != NULL && *h != '\0'; h++)
		if (strncasecmp(h, line, n) == 0)
			return true;
	return false;
}

static enum stub_next identity_handler(struct stub_agent *s,
				       const struct stub_req *req, int fd,
				       void *arg)
{
	struct identity *id = arg;
	char body[256];
	int status;

	(void)s;
	pthread_mutex_lock(&id->mu);
	id->calls++;
	snprintf(id->target, sizeof(id->target), "%s", req->target);
	id->header_ok = has_header(req, id->header);
	status = id->status;
	pthread_mutex_unlock(&id->mu);
	if (strcmp(req->path, id->path) != 0 || !has_header(req, id->header))
		return tt_answered(
			stub_reply(fd, 400, "application/json",
				   "{\"error\":\"invalid_request\"}"));
	if (status != 200)
		return tt_answered(stub_reply(
			fd, status, "application/json",
			"{\"error\":\"invalid_request\","
			"\"error_description\":\"Identity not found\"}"));
	snprintf(body, sizeof(body),
		 "{\"access_token\":\"%s\",\"expires_on\":\"%lld\","
		 "\"resource\":\"https://dynamicsessions.io\","
		 "\"token_type\":\"Bearer\"}",
		 id->token, (long long)time(NULL) + 3600);
	return tt_answered(stub_reply(fd, 200, "application/json", body));
}

/* A stub identity endpoint serving path to requests with header: its
 * token (status 200 until the case changes id->status). */
static struct stub_agent *identity_start(struct identity *id, const char *path,
					 const char *header, const char *token)
{
	memset(id, 0, sizeof(*id));
	pthread_mutex_init(&id->mu, NULL);
	id->path = path;
	id->header = header;
	id->status = 200;
	snprintf(id->token, sizeof(id->token), "%s", token);
	return stub_agent_start(identity_handler, id);
}

START_TEST(managed_identity_endpoint_gives_the_token)
{
	struct identity id;
	char endpoint[256];
	const char *envp[6];
	struct stub_agent *s;
	struct sbx_error err;
	struct az_env e;

	az_env_start(&e);
	azure_fake_accept_token(e.fake, "mi.token.1");
	s = identity_start(&id, "/msi/token",
			   "X-IDENTITY-HEADER: mi-header-value", "mi.token.1");
	snprintf(endpoint, sizeof(endpoint), "IDENTITY_ENDPOINT=%smsi/token",
		 stub_agent_url(s));
	envp[0] = endpoint;
	envp[1] = "IDENTITY_HEADER=mi-header-value";
	envp[2] = "PATH=/nonexistent";
	envp[3] = NULL;
	ck_assert_msg(env_list(&e, envp, &err) == 0, "%s", err.reason);
	pthread_mutex_lock(&id.mu);
	ck_assert_uint_eq(id.calls, 1);
	ck_assert(id.header_ok);
	ck_assert_str_eq(id.target,
			 "/msi/token?api-version=2019-08-01&"
			 "resource=https%3A%2F%2Fdynamicsessions.io");
	pthread_mutex_unlock(&id.mu);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 0);
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	stub_agent_stop(s);
	az_env_stop(&e);
}
END_TEST

static char *write_fake_az(const char *dir)
{
	char *bin = xasprintf("%s/bin", dir), *az;

	mkdir(bin, 0755);
	az = az_write_temp(
		bin, "az",
		"#!/bin/sh\n"
		"case \"$*\" in\n"
		"'account get-access-token --scope "
		"https://dynamicsessions.io/.default --output json') ;;\n"
		"*) echo \"ERROR: unexpected arguments: $*\" >&2; "
		"exit 2 ;;\n"
		"esac\n"
		"if [ -n \"$AZ_FAIL\" ]; then\n"
		"  echo \"ERROR: Please run 'az login' to setup "
		"account.\" >&2\n"
		"  echo \"second line\" >&2\n"
		"  exit 1\n"
		"fi\n"
		"printf '{\"accessToken\":\"cli.token.1\",\"expiresOn\":"
		"\"2099-01-01 00:00:00.000000\",\"subscription\":\"s\","
		"\"tenant\":\"t\",\"tokenType\":\"Bearer\"}\\n'\n");
	ck_assert_int_eq(chmod(az, 0755), 0);
	free(az);
	return bin;
}

START_TEST(imds_then_the_cli)
{
	struct identity id;
	char imds[256], path[512], refused[64];
	const char *envp[6];
	struct stub_agent *s;
	struct sbx_error err;
	struct az_env e;
	char *bin;

	az_env_start(&e);
	azure_fake_accept_token(e.fake, "imds.token.1");
	azure_fake_accept_token(e.fake, "cli.token.1");
	bin = write_fake_az(e.dir);
	snprintf(path, sizeof(path), "PATH=%s:/usr/bin:/bin", bin);

	/* The metadata service answers: a user-assigned identity. */
	s = identity_start(&id, "/metadata/identity/oauth2/token",
			   "Metadata: true", "imds.token.1");
	snprintf(imds, sizeof(imds), "AZURE_POD_IDENTITY_AUTHORITY_HOST=%.*s",
		 (int)strlen(stub_agent_url(s)) - 1, stub_agent_url(s));
	envp[0] = imds;
	envp[1] = "AZURE_CLIENT_ID=" AZURE_FAKE_CLIENT_ID;
	envp[2] = path;
	envp[3] = NULL;
	ck_assert_msg(env_list(&e, envp, &err) == 0, "%s", err.reason);
	pthread_mutex_lock(&id.mu);
	ck_assert_uint_eq(id.calls, 1);
	ck_assert_str_eq(id.target,
			 "/metadata/identity/oauth2/token?api-version="
			 "2018-02-01&resource=https%3A%2F%2Fdynamicsessions.io&"
			 "client_id=" AZURE_FAKE_CLIENT_ID);
	pthread_mutex_unlock(&id.mu);
	provider_free(e.prov);

	/* No identity there (400): the CLI gives the token. */
	id.status = 400;
	envp[1] = path;
	envp[2] = NULL;
	ck_assert_msg(env_list(&e, envp, &err) == 0, "%s", err.reason);
	ck_assert_uint_eq(id.calls, 2);
	provider_free(e.prov);
	stub_agent_stop(s);

	/* No metadata service at all: the CLI, once; its failure is its
	 * first line. */
	stub_refused_url(refused, sizeof(refused));
	snprintf(imds, sizeof(imds), "AZURE_POD_IDENTITY_AUTHORITY_HOST=%.*s",
		 (int)strlen(refused) - 1, refused);
	ck_assert_msg(env_list(&e, envp, &err) == 0, "%s", err.reason);
	provider_free(e.prov);
	envp[2] = "AZ_FAIL=1";
	envp[3] = NULL;
	ck_assert_int_eq(env_list(&e, envp, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.reason, "Azure CLI"));
	ck_assert_ptr_nonnull(strstr(err.reason, "Please run 'az login'"));
	ck_assert_ptr_null(strstr(err.reason, "second line"));
	provider_free(e.prov);

	/* Nothing at all: one clear error. */
	envp[1] = "PATH=/nonexistent";
	envp[2] = NULL;
	ck_assert_int_eq(env_list(&e, envp, &err), -ENOKEY);
	ck_assert_ptr_nonnull(strstr(err.reason, "no credential"));
	ck_assert_uint_eq(azure_fake_unauthorized(e.fake), 0);
	free(bin);
	az_env_stop(&e);
}
END_TEST

START_TEST(another_ca_is_not_trusted)
{
	struct azure_fake *other = NULL;
	struct sbx_error err;
	struct az_env e;
	char errbuf[256], *dir;

	az_env_start(&e);
	dir = th_tmpdir("azure2");
	ck_assert_msg(azure_fake_start(dir, &other, errbuf, sizeof(errbuf)) ==
			      0,
		      "%s", errbuf);
	/* The right names and addresses, the wrong trust: no exchange. */
	e.prov = az_env_provider_with(&e, -1, az_secret_env(&e),
				      azure_fake_ca_file(other));
	sbx_error_clear(&err);
	ck_assert_int_eq(az_list(e.prov, &err), -EIO);
	ck_assert_str_eq(sbx_code_name(err.code), "SANDBOX_UNREACHABLE");
	ck_assert_msg(strstr(err.reason, "certificate") != NULL ||
			      strstr(err.reason, "SSL") != NULL,
		      "%s", err.reason);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_TOKEN), 0);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_LIST), 0);
	azure_fake_stop(other);
	th_rmtree_free(dir);
	az_env_stop(&e);
}
END_TEST

void azure_auth_cases(Suite *s)
{
	TCASE_TABLE(s, "credentials", NULL, NULL, 60,
		    tokens_are_cached_until_five_minutes_before_expiry,
		    token_endpoint_errors_are_clear_and_carry_no_secret,
		    workload_identity_posts_the_federated_assertion,
		    managed_identity_endpoint_gives_the_token,
		    imds_then_the_cli, another_ca_is_not_trusted);
}
