/* SPDX-License-Identifier: MIT */
/*
 * spawn_run: the loop that turns a started command's two pipes into output
 * frames (spawn.h, agent_run) until it has exited and both pipes are
 * closed, the deadline passes or the caller stops it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/proc.h"
#include "agent/spawn.h"
#include "agent/zygote.h"
#include "common/clock.h"
#include "common/proto.h"
#include "common/xalloc.h"

/* Without a pidfd, how often the loop looks for the leader's exit. */
#define EXIT_POLL_MS 50
/* How long the zygote may take to tell an exit status its pidfd shows. */
#define ZYGOTE_STATUS_MS 5000

/* ---- the output loop ----------------------------------------------------- */

struct stream {
	int *fd;
	enum proto_frame_type type;
	unsigned char *buf; /* PROTO_MAX_FRAME_BYTES */
	size_t have;
	size_t kept;
};

struct run {
	const struct agent_run_sink *sink;
	size_t cap;
	int64_t deadline;
	uint64_t seq;
	bool truncated;
	int read_err; /* first pipe read error */
};

/* One frame: it takes a seq even when the cap drops it. Returns 0, the
 * sink's refusal, or -ETIMEDOUT when the sink held us past the deadline. */
static int emit(struct run *run, struct stream *st, const unsigned char *p,
		size_t n)
{
	uint64_t seq = run->seq++;
	int rc;

	if (st->kept + n > run->cap) {
		run->truncated = true;
		return 0;
	}
	st->kept += n;
	rc = run->sink->output(run->sink->ctx, st->type, seq, p, n);
	if (rc < 0)
		return rc;
	return clock_mono_ms() >= run->deadline ? -ETIMEDOUT : 0;
}

/* Read what the pipe has and emit every complete line, or a full
 * PROTO_MAX_FRAME_BYTES chunk, or the rest at the end of the stream. */
static int drain(struct run *run, struct stream *st)
{
	size_t start = 0, i, end;
	ssize_t n;
	int rc;

	n = read(*st->fd, st->buf + st->have, PROTO_MAX_FRAME_BYTES - st->have);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		/* The partial line is not output that happened in full. */
		if (run->read_err == 0)
			run->read_err = errno;
		proc_close(st->fd);
		return 0;
	}
	if (n == 0) {
		proc_close(st->fd);
		if (st->have == 0)
			return 0;
		rc = emit(run, st, st->buf, st->have);
		st->have = 0;
		return rc;
	}
	end = st->have + (size_t)n;
	if (run->sink->chunks) {
		st->have = 0;
		return emit(run, st, st->buf, end);
	}
	for (i = st->have; i < end; i++) {
		if (st->buf[i] != '\n')
			continue;
		rc = emit(run, st, st->buf + start, i + 1 - start);
		if (rc < 0)
			return rc;
		start = i + 1;
	}
	if (start > 0)
		memmove(st->buf, st->buf + start, end - start);
	st->have = end - start;
	if (st->have == PROTO_MAX_FRAME_BYTES) {
		st->have = 0;
		return emit(run, st, st->buf, PROTO_MAX_FRAME_BYTES);
	}
	return 0;
}

/* Has the leader exited? Looks without reaping. 0, or an errno. */
static int check_exit(struct agent_cmd *c)
{
	siginfo_t si;

	if (c->zc != NULL) {
		int32_t code;
		int rc;

		/* Its pidfd says it has: the zygote tells how. */
		rc = agent_zygote_wait(c->zc, ZYGOTE_STATUS_MS, &code);
		if (rc < 0)
			return -rc;
		c->exited = true;
		c->code = code;
		return 0;
	}

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == EINTR ? 0 : errno;
	if (si.si_pid != c->pid)
		return 0;
	c->exited = true;
	c->code = si.si_code == CLD_EXITED ? si.si_status : -1;
	return 0;
}

void agent_run(struct agent_cmd *c, uint64_t timeout_ms, size_t cap,
	       const struct agent_run_sink *sink, struct agent_run_result *res)
{
	struct run run = {sink, cap, agent_deadline(timeout_ms), 0, false, 0};
	struct stream st[2] = {
		{&c->out_fd, PROTO_FRAME_STDOUT, NULL, 0, 0},
		{&c->err_fd, PROTO_FRAME_STDERR, NULL, 0, 0},
	};
	int rc = 0, err, i;

	memset(res, 0, sizeof(*res));
	st[0].buf = xmalloc(PROTO_MAX_FRAME_BYTES);
	st[1].buf = xmalloc(PROTO_MAX_FRAME_BYTES);
	for (;;) {
		struct pollfd pfd[4];
		int nfd = 0, wait_ms, sidx[2] = {-1, -1}, stop = -1, pid = -1;
		int64_t left;

		if (c->exited && c->out_fd < 0 && c->err_fd < 0)
			break;
		left = run.deadline - clock_mono_ms();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		for (i = 0; i < 2; i++) {
			if (*st[i].fd < 0)
				continue;
			sidx[i] = nfd;
			pfd[nfd++] = (struct pollfd){*st[i].fd, POLLIN, 0};
		}
		if (sink->stop_fd >= 0) {
			stop = nfd;
			pfd[nfd++] = (struct pollfd){sink->stop_fd, POLLIN, 0};
		}
		if (!c->exited && c->pidfd >= 0) {
			pid = nfd;
			pfd[nfd++] = (struct pollfd){c->pidfd, POLLIN, 0};
		}
		wait_ms = left > INT_MAX ? INT_MAX : (int)left;
		if (!c->exited && c->pidfd < 0 && wait_ms > EXIT_POLL_MS)
			wait_ms = EXIT_POLL_MS;
		if (poll(pfd, (nfds_t)nfd, wait_ms) < 0 && errno != EINTR) {
			rc = -errno;
			res->err_code = "waitFailed";
			break;
		}
		if (stop >= 0 && pfd[stop].revents) {
			rc = -ECANCELED;
			break;
		}
		if (!c->exited && (c->pidfd < 0 || pfd[pid].revents)) {
			err = check_exit(c);
			if (err != 0) {
				rc = -err;
				res->err_code = "waitFailed";
				break;
			}
		}
		for (i = 0; i < 2 && rc == 0; i++)
			if (sidx[i] >= 0 && pfd[sidx[i]].revents)
				rc = drain(&run, &st[i]);
		if (rc < 0)
			break;
	}
	free(st[0].buf);
	free(st[1].buf);
	res->truncated = run.truncated;
	if (rc == 0 && run.read_err != 0) {
		res->end = AGENT_RUN_READ_FAILED;
		res->err_code = "outputReadFailed";
		agent_errno_text(run.read_err, res->message,
				 sizeof(res->message));
	} else if (rc == 0) {
		res->end = AGENT_RUN_EXITED;
		res->code = c->code;
	} else if (rc == -ETIMEDOUT) {
		agent_cmd_kill(c);
		res->end = AGENT_RUN_TIMEOUT;
		res->err_code = "timeoutExceeded";
		snprintf(res->message, sizeof(res->message),
			 "exceeded its %" PRIu64 "ms timeout", timeout_ms);
	} else if (res->err_code != NULL) {
		agent_cmd_kill(c);
		res->end = AGENT_RUN_WAIT_FAILED;
		agent_errno_text(-rc, res->message, sizeof(res->message));
	} else {
		agent_cmd_kill(c);
		res->end = AGENT_RUN_STOPPED;
	}
}
