/* SPDX-License-Identifier: MIT */
/*
 * zygote_wire: the messages and requests between the agent and its
 * zygote (zygote_i.h).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/proc.h"
#include "agent/spawn.h"
#include "agent/zygote_i.h"
#include "common/fdio.h"

int zwire_send(int sock, const struct zmsg *m, const int *fds, size_t nfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * ZM_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {(void *)m, sizeof(*m)};
	struct msghdr mh;
	ssize_t n;

	if (nfd > ZM_MAX_FDS)
		return -EINVAL;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfd > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
		c = CMSG_FIRSTHDR(&mh);
		if (c == NULL)
			return -EINVAL;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	return n == (ssize_t)sizeof(*m) ? 0 : -EPROTO;
}

int zwire_recv(int sock, struct zmsg *m, int *fds, size_t maxfd, size_t *nfd,
	       int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (ZM_MAX_FDS + 4))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {m, sizeof(*m)};
	struct cmsghdr *c;
	size_t got = 0, i;
	bool bad = false;
	ssize_t n;
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};

	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (got < maxfd)
				fds[got++] = fd;
			else {
				close(fd);
				bad = true;
			}
		}
	}
	if (bad || n != (ssize_t)sizeof(*m) ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (i = 0; i < got; i++)
			close(fds[i]);
		return -EPROTO;
	}
	*nfd = got;
	return 1;
}

int zwire_request_fd(char *const *argv, char *const *envp, const char *cwd,
		     int *out)
{
	struct zreq_head h = {ZREQ_MAGIC, 0, 0, 0};
	size_t size = sizeof(h), off, i;
	char *data = NULL;
	int fd = -1, rc = 0;

	for (i = 0; argv[i] != NULL; i++)
		size += strlen(argv[i]) + 1;
	h.argc = (uint32_t)i;
	for (i = 0; envp[i] != NULL; i++)
		size += strlen(envp[i]) + 1;
	h.envc = (uint32_t)i;
	size += strlen(cwd) + 1;
	if (size > ZREQ_MAX || h.argc > ZREQ_MAX_ARGS || h.envc > ZREQ_MAX_ENV)
		return -E2BIG;
	data = malloc(size);
	if (data == NULL)
		return -ENOMEM;
	memcpy(data, &h, sizeof(h));
	off = sizeof(h);
	for (i = 0; argv[i] != NULL; i++) {
		memcpy(data + off, argv[i], strlen(argv[i]) + 1);
		off += strlen(argv[i]) + 1;
	}
	for (i = 0; envp[i] != NULL; i++) {
		memcpy(data + off, envp[i], strlen(envp[i]) + 1);
		off += strlen(envp[i]) + 1;
	}
	memcpy(data + off, cwd, strlen(cwd) + 1);
	fd = memfd_create("sbfs-request", MFD_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = fdio_write_all(fd, data, size);
	if (rc < 0)
		goto out;
	*out = fd;
	fd = -1;
out:
	proc_close(&fd);
	free(data);
	return rc;
}

void zwire_request_cleanup(struct zreq *r)
{
	free(r->data);
	free(r->argv);
	free(r->envp);
	free(r->sh_argv);
	memset(r, 0, sizeof(*r));
}

int zwire_request_read(int memfd, struct zreq *r)
{
	struct zreq_head h;
	struct stat st;
	size_t size, off, i;
	char *end;
	int rc;

	memset(r, 0, sizeof(*r));
	if (fstat(memfd, &st) < 0)
		return errno;
	if (st.st_size < (off_t)sizeof(h) || (uint64_t)st.st_size > ZREQ_MAX)
		return E2BIG;
	size = (size_t)st.st_size;
	r->data = malloc(size + 1);
	if (r->data == NULL)
		return ENOMEM;
	rc = fdio_pread_all(memfd, r->data, size, 0);
	if (rc < 0)
		return rc == -EIO ? EPROTO : -rc;
	r->data[size] = '\0';
	memcpy(&h, r->data, sizeof(h));
	if (h.magic != ZREQ_MAGIC || h.argc == 0 || h.argc > ZREQ_MAX_ARGS ||
	    h.envc > ZREQ_MAX_ENV)
		return EPROTO;
	r->argv = calloc(h.argc + 1, sizeof(char *));
	r->envp = calloc(h.envc + 1, sizeof(char *));
	r->sh_argv = calloc(h.argc + 2, sizeof(char *));
	if (r->argv == NULL || r->envp == NULL || r->sh_argv == NULL)
		return ENOMEM;
	off = sizeof(h);
	for (i = 0; i < (size_t)h.argc + h.envc + 1; i++) {
		char *s = r->data + off;

		end = memchr(s, '\0', size - off);
		if (end == NULL)
			return EPROTO;
		if (i < h.argc)
			r->argv[i] = s;
		else if (i < (size_t)h.argc + h.envc)
			r->envp[i - h.argc] = s;
		else
			r->cwd = s;
		off = (size_t)(end - r->data) + 1;
	}
	if (off != size || r->cwd[0] != '/')
		return EPROTO;
	r->path = AGENT_DEFAULT_PATH;
	for (i = 0; i < h.envc; i++)
		if (strncmp(r->envp[i], "PATH=", 5) == 0)
			r->path = r->envp[i] + 5;
	r->sh_argv[0] = "/bin/sh";
	for (i = 0; i < h.argc; i++)
		r->sh_argv[i + 1] = r->argv[i];
	return 0;
}
