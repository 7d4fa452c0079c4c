/* SPDX-License-Identifier: MIT */
/*
 * The suite "azure_agents": real sandbox-agents behind the fake Azure's
 * TLS proxy through the transport core (readiness, the route policy,
 * activation judged on a fresh record), and the data plane and Entra ID
 * reached through an HTTPS proxy from the environment.
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
#include "common/fdio.h"
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

/* ---- an HTTPS proxy from the environment ------------------------------------ */

/*
 * A forward proxy that tunnels CONNECT host:port to 127.0.0.1:port (the
 * fake's names only resolve through pins) and records each target.
 */
struct tunnel {
	struct th_listener l;
	pthread_mutex_t mu;
	unsigned connects;
	char targets[1024];
};

struct tunnel_conn {
	struct tunnel *t;
	int client;
};

static void relay(int a, int b)
{
	char chunk[16384];

	for (;;) {
		struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
		int i;

		if (poll(p, 2, 10000) <= 0)
			return;
		for (i = 0; i < 2; i++) {
			ssize_t n;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(p[i].fd, chunk, sizeof(chunk));
			if (n <= 0 || write(p[1 - i].fd, chunk, (size_t)n) != n)
				return;
		}
	}
}

static void *tunnel_conn_main(void *arg)
{
	struct tunnel_conn *c = arg;
	char head[2048], host[512];
	size_t len = 0;
	unsigned port = 0;
	int up = -1;

	while (len + 1 < sizeof(head)) {
		ssize_t n = read(c->client, head + len, 1);

		if (n <= 0)
			goto out;
		len += (size_t)n;
		head[len] = '\0';
		if (len >= 4 && strcmp(head + len - 4, "\r\n\r\n") == 0)
			break;
	}
	if (sscanf(head, "CONNECT %511[^: ]:%u ", host, &port) != 2)
		goto out;
	pthread_mutex_lock(&c->t->mu);
	c->t->connects++;
	if (strlen(c->t->targets) + strlen(host) + 2 < sizeof(c->t->targets)) {
		strcat(c->t->targets, host);
		strcat(c->t->targets, " ");
	}
	pthread_mutex_unlock(&c->t->mu);
	up = th_connect_loopback(port);
	if (up < 0)
		goto out;
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	if (write(c->client, ok, sizeof(ok) - 1) != (ssize_t)sizeof(ok) - 1)
		goto out;
	relay(c->client, up);
out:
	fdio_close(up);
	close(c->client);
	free(c);
	return NULL;
}

static void *tunnel_main(void *arg)
{
	struct tunnel *t = arg;

	for (;;) {
		struct tunnel_conn *c;
		pthread_t th;
		int fd = accept(t->l.fd, NULL, NULL);

		if (fd < 0)
			return NULL;
		c = xcalloc(1, sizeof(*c));
		c->t = t;
		c->client = fd;
		if (pthread_create(&th, NULL, tunnel_conn_main, c) != 0) {
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(th);
	}
}

static void tunnel_start(struct tunnel *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	th_listener_start(&t->l, tunnel_main, t);
}

static unsigned tunnel_connects(struct tunnel *t, char *targets, size_t size)
{
	unsigned n;

	pthread_mutex_lock(&t->mu);
	n = t->connects;
	snprintf(targets, size, "%s", t->targets);
	pthread_mutex_unlock(&t->mu);
	return n;
}

/*
 * The data plane and Entra ID are reached through HTTPS_PROXY when it is
 * set (as the Azure SDKs do), and directly for the names NO_PROXY lists;
 * an agent behind Azure's own proxy is never reached through it.
 */
/* A real agent a whose root holds hello.txt with text, given to the
 * commands' user. */
static void agent_with_hello(struct th_agent *a, const char *text)
{
	char *path;

	th_agent_start(a, NULL, false);
	path = xasprintf("%s/hello.txt", a->root);
	th_write_file(path, text, strlen(text));
	free(path);
	th_give_to_exec_user(a->root);
}

/*
 * The same, served as sandbox ID by e's fake over TLS (its URL in url
 * when url is not NULL), with a provider over the fake in e->prov.
 */
static void agent_behind_fake(struct az_env *e, struct th_agent *a,
			      const char *text, char *url, size_t url_size)
{
	agent_with_hello(a, text);
	azure_fake_add(e->fake, ID);
	azure_fake_set_agent(e->fake, ID, a->port, true, url, url_size);
	azure_fake_map_file(e->fake, ID, AZURE_FAKE_TOKEN_PATH, a->token_file);
	az_env_provider(e, -1);
}

START_TEST(the_data_plane_and_entra_honour_https_proxy)
{
	struct tunnel tun;
	struct th_agent a;
	struct buf content = BUF_INIT(1024 * 1024);
	struct sbx_error err;
	struct transport *t;
	struct az_env e;
	char env[64], targets[1024];
	unsigned before;

	az_env_start(&e);
	tunnel_start(&tun);
	snprintf(env, sizeof(env), "http://127.0.0.1:%u", tun.l.port);
	setenv("HTTPS_PROXY", env, 1);
	agent_behind_fake(&e, &a, "through no proxy\n", NULL, 0);
	az_read_record(e.prov, ID);
	ck_assert_uint_ge(tunnel_connects(&tun, targets, sizeof(targets)), 1);
	ck_assert_msg(strstr(targets, "login.microsoftonline.com") != NULL &&
			      strstr(targets, "azuredevcompute.io") != NULL,
		      "%s", targets);

	/* Through the transport: data-plane calls tunnel, the agent does
	 * not. */
	t = az_agent_transport(e.prov);
	sbx_error_clear(&err);
	ck_assert_msg(ac_read_file(t, ID, "hello.txt", &content, &err) == 0,
		      "%s", err.reason);
	ck_assert_str_eq(content.data, "through no proxy\n");
	tunnel_connects(&tun, targets, sizeof(targets));
	ck_assert_msg(strstr(targets, "adcproxy.io") == NULL, "%s", targets);
	transport_free(t);
	provider_free(e.prov);

	/* NO_PROXY lists the names: no tunnel. */
	setenv("NO_PROXY",
	       "login.microsoftonline.com,.azuredevcompute.io,localhost", 1);
	az_env_provider(&e, -1);
	before = tunnel_connects(&tun, targets, sizeof(targets));
	az_read_record(e.prov, ID);
	ck_assert_uint_eq(tunnel_connects(&tun, targets, sizeof(targets)),
			  before);

	unsetenv("HTTPS_PROXY");
	unsetenv("NO_PROXY");
	buf_cleanup(&content);
	th_agent_stop(&a);
	th_listener_stop(&tun.l);
	az_env_stop(&e);
}
END_TEST

/* ---- agents behind the proxy ------------------------------------------------- */

START_TEST(a_real_agent_behind_the_proxy)
{
	struct th_agent a, b;
	struct buf content = BUF_INIT(1024 * 1024);
	struct sbx_error err;
	struct transport *t;
	struct az_env e;
	char url[256], host[256];

	az_env_start(&e);
	agent_behind_fake(&e, &a, "hello over TLS\n", url, sizeof(url));
	t = az_agent_transport(e.prov);

	sbx_error_clear(&err);
	ck_assert_msg(ac_read_file(t, ID, "hello.txt", &content, &err) == 0,
		      "%s", err.reason);
	ck_assert_str_eq(content.data, "hello over TLS\n");
	buf_reset(&content);
	ck_assert_int_eq(ac_read_file(t, ID, "missing", &content, &err),
			 -ENOENT);
	ck_assert_uint_eq(transport_generation(t, ID), 1);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 1);
	snprintf(host, sizeof(host), "%s--8971.%s.adcproxy.io", ID,
		 AZURE_FAKE_REGION);
	ck_assert_uint_ge(azure_fake_proxy_accepts(e.fake, host), 1);

	/* A new boot: new credential and port behind the same URL. The
	 * refused request is refreshed, activated and replayed. */
	agent_with_hello(&b, "the second boot\n");
	th_agent_stop(&a);
	azure_fake_set_agent(e.fake, ID, b.port, true, NULL, 0);
	azure_fake_map_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, b.token_file);
	buf_reset(&content);
	ck_assert_msg(ac_read_file(t, ID, "hello.txt", &content, &err) == 0,
		      "%s", err.reason);
	ck_assert_str_eq(content.data, "the second boot\n");
	ck_assert_uint_eq(transport_generation(t, ID), 2);
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 2);

	buf_cleanup(&content);
	transport_free(t);
	th_agent_stop(&b);
	az_env_stop(&e);
}
END_TEST

static void slow_credential(struct azure_fake *f, enum azure_fake_route r,
			    const char *id, void *arg)
{
	(void)f;
	(void)r;
	(void)id;
	(void)arg;
	usleep(3000 * 1000);
}

/*
 * The readiness deadline bounds the credential fetch it starts: a data
 * plane that takes three seconds to hand out the credential ends a wait
 * whose deadline is 800 ms at about that deadline, not after the read.
 */
START_TEST(readiness_deadline_bounds_the_credential_fetch)
{
	struct transport_config cfg;
	struct sbx_error err;
	struct transport *t = NULL;
	struct az_env e;
	long long t0, elapsed;
	int rc;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_agent(e.fake, ID, 1, true, NULL, 0);
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH,
			    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 44);
	az_env_provider(&e, -1);
	/* A token first, so that only the credential read is slow. */
	az_read_record(e.prov, ID);
	azure_fake_set_hook(e.fake, AZF_CREDENTIAL, slow_credential, NULL);
	transport_config_defaults(&cfg);
	cfg.ready_timeout_ms = 800;
	cfg.ready_interval_ms = 50;
	ck_assert_int_eq(transport_new(e.prov, &cfg, &t), 0);
	sbx_error_clear(&err);
	t0 = th_now_ms();
	rc = transport_wait_ready(t, ID, NULL, &err);
	elapsed = th_now_ms() - t0;
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(elapsed >= 700 && elapsed < 2500, "%lld ms: %s", elapsed,
		      err.reason);
	ck_assert_uint_ge(azure_fake_calls(e.fake, AZF_CREDENTIAL), 1);
	transport_free(t);
	az_env_stop(&e);
}
END_TEST

START_TEST(routes_outside_the_policy_are_refused_before_the_credential)
{
	static const char *const urls[] = {
		"https://box--8971.eastus.adcproxy.io/?x=1",
		"https://user@box--8971.eastus.adcproxy.io/",
		"https://box--8971.eastus.example.com/",
		"http://box--8971.eastus.adcproxy.io/",
		"https://box--8971.eastus.adcproxy.io/v1",
		"https://box--8971.eastus.adcproxy.io/#f",
	};
	struct transport_resp resp;
	struct transport_req req;
	struct sbx_error err;
	struct az_env e;
	size_t i;

	az_env_start(&e);
	azure_fake_add(e.fake, ID);
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH,
			    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 44);
	az_env_provider(&e, -1);
	memset(&req, 0, sizeof(req));
	req.op = TRANSPORT_OP_HEALTH;
	req.cls = TRANSPORT_SAFE;
	req.method = "GET";
	req.path = "/v1/health?version=1";
	for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		struct transport *t = az_agent_transport(e.prov);

		azure_fake_set_port_url(e.fake, ID, urls[i]);
		transport_resp_init(&resp);
		sbx_error_clear(&err);
		ck_assert_int_eq(transport_send(t, ID, &req, &resp, &err),
				 -EPROTO);
		ck_assert_str_eq(err.failure, SBX_FAIL_TRANSPORT_INVALID);
		ck_assert(!err.retryable);
		transport_resp_cleanup(&resp);
		transport_free(t);
	}
	ck_assert_uint_eq(azure_fake_calls(e.fake, AZF_CREDENTIAL), 0);
	az_env_stop(&e);
}
END_TEST

START_TEST(activation_is_judged_on_a_fresh_record)
{
	struct tt_counting c = {
		.mu = PTHREAD_MUTEX_INITIALIZER,
		.type = "application/json",
		.body = "{\"protocolVersion\":1,\"status\":\"ready\","
			"\"imageCommand\":{\"status\":\"running\"}}"};
	struct transport_resp resp;
	struct transport_req req;
	struct stub_agent *s;
	struct sbx_error err;
	struct transport *t;
	struct az_env e;
	char cred[45];
	unsigned before;

	az_env_start(&e);
	s = stub_agent_start(tt_counting_handler, &c);
	azure_fake_add(e.fake, ID);
	azure_fake_set_agent(e.fake, ID, stub_agent_port(s), true, NULL, 0);
	memset(cred, 'A', 43);
	cred[43] = '=';
	cred[44] = '\0';
	azure_fake_set_file(e.fake, ID, AZURE_FAKE_TOKEN_PATH, cred, 44);
	az_env_provider(&e, -1);
	t = az_agent_transport(e.prov);
	memset(&req, 0, sizeof(req));
	req.op = TRANSPORT_OP_HEALTH;
	req.cls = TRANSPORT_SAFE;
	req.method = "GET";
	req.path = "/v1/health?version=1";

	/* A record read (cached) with a policy, then the policy is removed:
	 * the activation's own read sees that and refuses. */
	az_read_record(e.prov, ID);
	azure_fake_set_egress(e.fake, ID, NULL);
	before = az_record_gets(&e);
	transport_resp_init(&resp);
	sbx_error_clear(&err);
	ck_assert_int_eq(transport_send(t, ID, &req, &resp, &err), -EPROTO);
	ck_assert_str_eq(err.failure, SBX_FAIL_TRANSPORT_INVALID);
	ck_assert_msg(strstr(err.reason, "egress policy is missing") != NULL,
		      "%s", err.reason);
	transport_resp_cleanup(&resp);
	/* The route fetch and the activation's read both went out. */
	ck_assert_uint_eq(az_record_gets(&e), before + 2);
	pthread_mutex_lock(&c.mu);
	ck_assert_uint_eq(c.requests, 0);
	pthread_mutex_unlock(&c.mu);

	/* A vnet and an Allow policy are accepted. */
	azure_fake_set_egress(e.fake, ID, "{\"defaultAction\":\"Allow\"}");
	azure_fake_set_vnet(e.fake, ID, "customer-vnet");
	transport_resp_init(&resp);
	ck_assert_msg(transport_send(t, ID, &req, &resp, &err) == 0, "%s",
		      err.reason);
	ck_assert_int_eq(resp.status, 200);
	transport_resp_cleanup(&resp);
	pthread_mutex_lock(&c.mu);
	ck_assert_uint_eq(c.activations, 1);
	pthread_mutex_unlock(&c.mu);
	transport_free(t);
	stub_agent_stop(s);
	az_env_stop(&e);
}
END_TEST

void azure_agents_cases(Suite *s)
{
	TCASE_TABLE(s, "agents", NULL, NULL, 60, a_real_agent_behind_the_proxy,
		    the_data_plane_and_entra_honour_https_proxy,
		    readiness_deadline_bounds_the_credential_fetch,
		    routes_outside_the_policy_are_refused_before_the_credential,
		    activation_is_judged_on_a_fresh_record);
}
