/* SPDX-License-Identifier: MIT */
/*
 * azure_fake_proxy: the fake Azure's TLS relay in front of the agents
 * (azure_fake_i.h): a connection for a routed host name is relayed to
 * its agent's loopback port.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/proto.h"
#include "common/proto_azure.h"
#include "common/xalloc.h"
#include "tests/azure_fake.h"
#include "tests/azure_fake_i.h"
#include "tests/sys_helpers.h"

/* ---- the proxy -------------------------------------------------------------- */

void azure_fake_proxy_route(struct azure_fake *f, const char *host,
			    unsigned port)
{
	struct route_entry **pp, *r;

	pthread_mutex_lock(&f->mu);
	for (pp = &f->routes; (r = *pp) != NULL; pp = &r->next)
		if (strcasecmp(r->host, host) == 0)
			break;
	if (r == NULL && port != 0) {
		r = xcalloc(1, sizeof(*r));
		r->host = xstrdup(host);
		*pp = r;
	}
	if (r != NULL)
		r->port = port;
	pthread_mutex_unlock(&f->mu);
}

unsigned azure_fake_proxy_accepts(struct azure_fake *f, const char *host)
{
	struct route_entry *r;
	unsigned n = 0;

	pthread_mutex_lock(&f->mu);
	for (r = f->routes; r != NULL; r = r->next)
		if (strcasecmp(r->host, host) == 0)
			n = r->accepts;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* A connection to an agent's loopback port, each write sent at once;
 * -errno when there is none. */
static int connect_loopback(unsigned port)
{
	int fd = th_connect_loopback(port), one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static bool ssl_write_all(SSL *ssl, const char *p, size_t n)
{
	while (n > 0) {
		int w = SSL_write(ssl, p, (int)n);

		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void *relay_main(void *arg)
{
	struct relay *rl = arg;
	struct azure_fake *f = rl->f;
	struct route_entry *r;
	struct timeval tv = {10, 0};
	const char *host;
	unsigned port = 0;
	char buf[16384];
	int one = 1;
	SSL *ssl;

	ssl = SSL_new(f->ctx);
	if (ssl == NULL)
		goto out;
	/* The handshake has a deadline; the relay then waits in poll. Each
	 * relayed chunk goes out at once, as the agent wrote it. */
	setsockopt(rl->cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(rl->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	SSL_set_fd(ssl, rl->cfd);
	if (SSL_accept(ssl) != 1)
		goto out;
	host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	pthread_mutex_lock(&f->mu);
	for (r = f->routes; host != NULL && r != NULL; r = r->next) {
		if (strcasecmp(r->host, host) == 0) {
			port = r->port;
			r->accepts++;
		}
	}
	pthread_mutex_unlock(&f->mu);
	if (port == 0)
		goto out;
	pthread_mutex_lock(&f->mu);
	rl->bfd = f->stopping ? -1 : connect_loopback(port);
	pthread_mutex_unlock(&f->mu);
	if (rl->bfd < 0)
		goto out;
	for (;;) {
		struct pollfd pfd[2] = {{rl->cfd, POLLIN, 0},
					{rl->bfd, POLLIN, 0}};
		bool stopping;
		int n;

		pthread_mutex_lock(&f->mu);
		stopping = f->stopping;
		pthread_mutex_unlock(&f->mu);
		if (stopping)
			break;
		if (SSL_pending(ssl) == 0 && poll(pfd, 2, 500) <= 0)
			continue;
		if (SSL_pending(ssl) > 0 ||
		    (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = SSL_read(ssl, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (!send_all(rl->bfd, buf, (size_t)n))
				break;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t got = recv(rl->bfd, buf, sizeof(buf), 0);

			if (got <= 0) {
				/* The agent closed: so does the proxy, with a
				 * clean TLS close. */
				SSL_shutdown(ssl);
				break;
			}
			if (!ssl_write_all(ssl, buf, (size_t)got))
				break;
		}
	}
out:
	SSL_free(ssl);
	/* Closed under the lock, so that stop never shuts down a number
	 * the kernel gave to something else since. */
	pthread_mutex_lock(&f->mu);
	fdio_close(rl->bfd);
	close(rl->cfd);
	rl->bfd = rl->cfd = -1;
	rl->done = true;
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* Join the relays that ended. */
static void reap_relays(struct azure_fake *f)
{
	struct relay **pp, *rl, *done = NULL;

	pthread_mutex_lock(&f->mu);
	for (pp = &f->relays; (rl = *pp) != NULL;) {
		if (rl->done) {
			*pp = rl->next;
			rl->next = done;
			done = rl;
		} else {
			pp = &rl->next;
		}
	}
	pthread_mutex_unlock(&f->mu);
	while ((rl = done) != NULL) {
		done = rl->next;
		pthread_join(rl->th, NULL);
		free(rl);
	}
}

static void *accept_main(void *arg)
{
	struct azure_fake *f = arg;

	for (;;) {
		struct relay *rl;
		int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);

		pthread_mutex_lock(&f->mu);
		if (f->stopping) {
			pthread_mutex_unlock(&f->mu);
			fdio_close(fd);
			break;
		}
		pthread_mutex_unlock(&f->mu);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		reap_relays(f);
		rl = xcalloc(1, sizeof(*rl));
		rl->f = f;
		rl->cfd = fd;
		rl->bfd = -1;
		pthread_mutex_lock(&f->mu);
		rl->next = f->relays;
		f->relays = rl;
		pthread_mutex_unlock(&f->mu);
		if (pthread_create(&rl->th, NULL, relay_main, rl) != 0) {
			pthread_mutex_lock(&f->mu);
			f->relays = rl->next;
			pthread_mutex_unlock(&f->mu);
			close(fd);
			free(rl);
		}
	}
	return NULL;
}

int azf_proxy_start(struct azure_fake *f, char *errbuf, size_t errsz)
{
	f->ctx = SSL_CTX_new(TLS_server_method());
	if (f->ctx == NULL || SSL_CTX_use_certificate(f->ctx, f->cert) != 1 ||
	    SSL_CTX_use_PrivateKey(f->ctx, f->key) != 1) {
		azf_say(errbuf, errsz,
			"the proxy's TLS context could not be made");
		return -EIO;
	}
	f->lfd = th_listen_loopback(64, &f->proxy_port);
	if (f->lfd < 0) {
		azf_say(errbuf, errsz, "the proxy cannot listen: %s",
			strerror(-f->lfd));
		return -EIO;
	}
	if (pthread_create(&f->accept_th, NULL, accept_main, f) != 0) {
		azf_say(errbuf, errsz, "the proxy's thread did not start");
		return -EIO;
	}
	f->accepting = true;
	return 0;
}

void azf_proxy_stop(struct azure_fake *f)
{
	struct relay *rl, *next;

	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	for (rl = f->relays; rl != NULL; rl = rl->next) {
		if (rl->cfd >= 0)
			shutdown(rl->cfd, SHUT_RDWR);
		if (rl->bfd >= 0)
			shutdown(rl->bfd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&f->mu);
	if (f->lfd >= 0)
		shutdown(f->lfd, SHUT_RDWR);
	if (f->accepting)
		pthread_join(f->accept_th, NULL);
	fdio_close(f->lfd);
	/* No relay is added after the accept thread ended. */
	for (rl = f->relays; rl != NULL; rl = next) {
		next = rl->next;
		pthread_join(rl->th, NULL);
		free(rl);
	}
	f->relays = NULL;
}
