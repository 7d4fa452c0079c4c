/* SPDX-License-Identifier: MIT */
/*
 * vis-probe: how long a change made to a file on the host takes to show
 * through another view of the same directory (a mount of it), for the
 * visibility rows of bench/run (bench/README.md, workload 9).
 *
 *   vis-probe stat [-n K] [-d DEADLINE_MS] [-b BUDGET_S] NATIVE_DIR VIEW_DIR
 *   vis-probe tail [-n K] [-d DEADLINE_MS] [-i INTERVAL_MS] [-s SLEEP]
 *                  -o OUT NATIVE_FILE VIEW_FILE
 *
 * stat: makes K files s0001... in NATIVE_DIR (owned as NATIVE_DIR is, as
 * a job of the sandbox would make them), then for each in turn: waits
 * until VIEW_DIR shows it, stats it there once (so the view has its
 * attributes cached), appends a line to it in NATIVE_DIR, and polls its
 * size through VIEW_DIR (fstatat, 1 ms apart) until it changes, at most
 * DEADLINE_MS (default 5000). One line per sample on standard output:
 *
 *   I MS ok SEEN WANT VIEW_HASH NATIVE_HASH
 *   I MS deadline SEEN WANT - -
 *
 * MS the delay from the end of the append (its close) to the first stat
 * that showed another size; SEEN that size, WANT the native one; the
 * hashes (FNV-1a, 64 bits) of the file's contents read through the view
 * right after, and natively. A sample whose change did not show within
 * the deadline says deadline, with MS the deadline. The caller judges the
 * answers: SEEN must be WANT and the hashes equal. Sampling stops early
 * once the samples took BUDGET_S seconds (at least one is taken).
 *
 * tail: writes "start" into NATIVE_FILE, waits until VIEW_FILE shows it,
 * starts `tail -f -s SLEEP -n +1 VIEW_FILE` (SLEEP default 0.1) and, once
 * tail printed that first line, appends K lines to NATIVE_FILE, one every
 * INTERVAL_MS (default 100) on average, each opened, written and closed as
 * a shell's `echo >>` does. The gaps are drawn from half to one and a half
 * INTERVAL_MS (the same sequence every time): with even gaps, the lines
 * would meet tail's polling (every SLEEP seconds on a file system it
 * deems remote, as FUSE) at the same phase each time, and the lag would
 * be that phase rather than a spread. Every byte tail prints goes to OUT;
 * one line per line written on standard output:
 *
 *   I MS ok        (tail printed it MS after its append was closed)
 *   I MS deadline  (not within DEADLINE_MS; MS is the deadline)
 *
 * It stops DEADLINE_MS after the last append at the latest, and ends tail.
 * The caller compares OUT with NATIVE_FILE.
 *
 * Exit 0 when every sample was taken (whatever it showed), 1 on an error
 * (said on standard error; a stat or read failing through the view is
 * one), 2 on bad usage. Every wait has a deadline; waiting for a file to
 * appear in the view takes at most 60 s.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VIS_MAX_SAMPLES 100000
#define VIS_MAX_DEADLINE_MS 600000
#define VIS_APPEAR_MS 60000
#define VIS_POLL_NS 1000000
#define VIS_MAX_FILE (4 * 1024 * 1024)
#define VIS_LINE_MAX 256

static const char *prog = "vis-probe";

static void say(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000,
			      .tv_nsec = ns % 1000000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int parse_uint(const char *s, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Appends len bytes to path, opened and closed as `echo >>` does. */
static int append(const char *path, const char *data, size_t len,
		  off_t *size_out)
{
	struct stat st;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	if (n < 0) {
		ret = -errno;
		goto out;
	}
	if ((size_t)n != len) {
		ret = -EIO;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	*size_out = st.st_size;
out:
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	return ret;
}

/* Makes path with the given contents, owned as the directory it is in. */
static int make_file(const char *path, const struct stat *owner,
		     const char *data)
{
	size_t len = strlen(data);
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (fchown(fd, owner->st_uid, owner->st_gid) < 0) {
		ret = -errno;
		goto out;
	}
	n = write(fd, data, len);
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != len)
		ret = -EIO;
out:
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	return ret;
}

/* The FNV-1a hash of a file's contents, read whole (at most VIS_MAX_FILE). */
static int hash_file(const char *path, uint64_t *out)
{
	static char buf[65536];
	uint64_t h = 14695981039346656037ULL;
	size_t total = 0;
	ssize_t n, i;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		if (total > VIS_MAX_FILE) {
			ret = -EFBIG;
			goto out;
		}
		for (i = 0; i < n; i++) {
			h ^= (unsigned char)buf[i];
			h *= 1099511628211ULL;
		}
	}
	*out = h;
out:
	close(fd);
	return ret;
}

/* Waits until path can be stat'ed, at most VIS_APPEAR_MS. */
static int wait_appear(const char *path, struct stat *st)
{
	int64_t end = now_ns() + (int64_t)VIS_APPEAR_MS * 1000000;

	for (;;) {
		if (fstatat(AT_FDCWD, path, st, 0) == 0)
			return 0;
		if (errno != ENOENT)
			return -errno;
		if (now_ns() >= end)
			return -ETIMEDOUT;
		sleep_ns(10 * VIS_POLL_NS);
	}
}

struct opts {
	long samples;
	long deadline_ms;
	long budget_s;
	long interval_ms;
	const char *tail_sleep;
	const char *out;
};

static int run_stat(const struct opts *o, const char *ndir, const char *vdir)
{
	char npath[PATH_MAX], vpath[PATH_MAX], line[VIS_LINE_MAX];
	int64_t start = now_ns(), t0, t, dl_ns = o->deadline_ms * 1000000;
	uint64_t vh, nh;
	struct stat dst, st;
	off_t old, want;
	long i;
	int ret;

	if (stat(ndir, &dst) < 0) {
		ret = -errno;
		say("%s: %s", ndir, strerror(-ret));
		return ret;
	}
	for (i = 1; i <= o->samples; i++) {
		snprintf(npath, sizeof(npath), "%s/s%04ld", ndir, i);
		snprintf(line, sizeof(line), "sample %ld\n", i);
		ret = make_file(npath, &dst, line);
		if (ret < 0) {
			say("cannot make %s: %s", npath, strerror(-ret));
			return ret;
		}
	}
	for (i = 1; i <= o->samples; i++) {
		if (i > 1 && o->budget_s > 0 &&
		    now_ns() - start >= (int64_t)o->budget_s * 1000000000)
			break;
		snprintf(npath, sizeof(npath), "%s/s%04ld", ndir, i);
		snprintf(vpath, sizeof(vpath), "%s/s%04ld", vdir, i);
		ret = wait_appear(vpath, &st);
		if (ret < 0) {
			say("%s: %s", vpath, strerror(-ret));
			return ret;
		}
		/* The view has the attributes now; the sample starts. */
		if (fstatat(AT_FDCWD, vpath, &st, 0) < 0) {
			ret = -errno;
			say("%s: %s", vpath, strerror(-ret));
			return ret;
		}
		old = st.st_size;
		snprintf(line, sizeof(line), "appended by sample %ld\n", i);
		ret = append(npath, line, strlen(line), &want);
		if (ret < 0) {
			say("cannot append to %s: %s", npath, strerror(-ret));
			return ret;
		}
		t0 = now_ns();
		for (;;) {
			if (fstatat(AT_FDCWD, vpath, &st, 0) < 0) {
				ret = -errno;
				say("%s: %s", vpath, strerror(-ret));
				return ret;
			}
			t = now_ns();
			if (st.st_size != old || t - t0 >= dl_ns)
				break;
			sleep_ns(VIS_POLL_NS);
		}
		if (st.st_size == old) {
			printf("%ld %.3f deadline %jd %jd - -\n", i,
			       (double)o->deadline_ms, (intmax_t)st.st_size,
			       (intmax_t)want);
			fflush(stdout);
			continue;
		}
		ret = hash_file(vpath, &vh);
		if (ret == 0)
			ret = hash_file(npath, &nh);
		if (ret < 0) {
			say("cannot read sample %ld: %s", i, strerror(-ret));
			return ret;
		}
		printf("%ld %.4f ok %jd %jd %016" PRIx64 " %016" PRIx64 "\n", i,
		       (double)(t - t0) / 1e6, (intmax_t)st.st_size,
		       (intmax_t)want, vh, nh);
		fflush(stdout);
	}
	return 0;
}

/* Starts tail -f on path, its standard output into a pipe (*fd_out). */
static int start_tail(const struct opts *o, const char *path, pid_t *pid_out,
		      int *fd_out)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		/* tail must not outlive a probe that is killed. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			_exit(1);
		if (dup2(p[1], STDOUT_FILENO) < 0)
			_exit(127);
		execlp("tail", "tail", "-f", "-s", o->tail_sleep, "-n", "+1",
		       "--", path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*pid_out = pid;
	*fd_out = p[0];
	return 0;
}

/*
 * What tail printed, split into lines: each complete line is handed to
 * the caller with the time it arrived.
 */
struct tail_in {
	int fd;
	FILE *out;
	char buf[VIS_LINE_MAX];
	size_t len;
	bool eof;
};

/*
 * Reads what is there, waiting at most until end_ns; returns the number of
 * the next complete line (1 for "start", then 2...) through *line, or 0
 * when none came. Lines longer than VIS_LINE_MAX are an error.
 */
static int tail_line(struct tail_in *in, int64_t end_ns, long *line)
{
	struct pollfd pfd = {.fd = in->fd, .events = POLLIN};
	char *nl;
	ssize_t n;
	int64_t left;
	long v;

	for (;;) {
		nl = memchr(in->buf, '\n', in->len);
		if (nl) {
			*nl = '\0';
			if (strcmp(in->buf, "start") == 0)
				v = 1;
			else if (sscanf(in->buf, "line %ld", &v) != 1)
				v = -1;
			else
				v++;
			in->len -= (size_t)(nl + 1 - in->buf);
			memmove(in->buf, nl + 1, in->len);
			*line = v;
			return 0;
		}
		if (in->len == sizeof(in->buf))
			return -E2BIG;
		if (in->eof) {
			*line = 0;
			return 0;
		}
		left = end_ns - now_ns();
		if (left <= 0) {
			*line = 0;
			return 0;
		}
		n = poll(&pfd, 1, (int)((left + 999999) / 1000000));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		n = read(in->fd, in->buf + in->len, sizeof(in->buf) - in->len);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0) {
			in->eof = true;
			continue;
		}
		if (fwrite(in->buf + in->len, 1, (size_t)n, in->out) !=
		    (size_t)n)
			return -EIO;
		in->len += (size_t)n;
	}
}

static int run_tail(const struct opts *o, const char *nfile, const char *vfile)
{
	char dir[PATH_MAX], text[VIS_LINE_MAX], *slash;
	struct tail_in in = {.fd = -1, .out = NULL};
	int64_t *written = NULL, *arrived = NULL, now, next, end;
	int64_t dl_ns = o->deadline_ms * 1000000;
	uint64_t rnd = 88172645463325252ULL;
	long i, got = 0, nw = 0, line;
	struct stat dst, st;
	pid_t pid = -1;
	off_t size;
	int ret, status;

	written = calloc((size_t)o->samples + 2, sizeof(*written));
	arrived = calloc((size_t)o->samples + 2, sizeof(*arrived));
	if (!written || !arrived) {
		ret = -ENOMEM;
		goto out;
	}
	in.out = fopen(o->out, "we");
	if (!in.out) {
		ret = -errno;
		say("%s: %s", o->out, strerror(-ret));
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s", nfile);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (stat(slash ? dir : ".", &dst) < 0) {
		ret = -errno;
		say("%s: %s", dir, strerror(-ret));
		goto out;
	}
	ret = make_file(nfile, &dst, "start\n");
	if (ret < 0) {
		say("cannot make %s: %s", nfile, strerror(-ret));
		goto out;
	}
	end = now_ns() + (int64_t)VIS_APPEAR_MS * 1000000;
	for (;;) {
		ret = wait_appear(vfile, &st);
		if (ret < 0) {
			say("%s: %s", vfile, strerror(-ret));
			goto out;
		}
		if (st.st_size > 0)
			break;
		if (now_ns() >= end) {
			ret = -ETIMEDOUT;
			say("%s stays empty", vfile);
			goto out;
		}
		sleep_ns(10 * VIS_POLL_NS);
	}
	ret = start_tail(o, vfile, &pid, &in.fd);
	if (ret < 0) {
		say("cannot start tail: %s", strerror(-ret));
		goto out;
	}
	ret = tail_line(&in, now_ns() + (int64_t)VIS_APPEAR_MS * 1000000,
			&line);
	if (ret == 0 && line != 1)
		ret = -EPROTO;
	if (ret < 0) {
		say("tail -f %s did not print its first line: %s", vfile,
		    strerror(-ret));
		goto out;
	}
	next = now_ns();
	end = INT64_MAX;
	while (got < o->samples) {
		now = now_ns();
		if (nw < o->samples && now >= next) {
			nw++;
			snprintf(text, sizeof(text), "line %ld of %ld\n", nw,
				 o->samples);
			ret = append(nfile, text, strlen(text), &size);
			if (ret < 0) {
				say("cannot append to %s: %s", nfile,
				    strerror(-ret));
				goto out;
			}
			written[nw] = now_ns();
			/* xorshift64: a fixed sequence of gaps. */
			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			next += o->interval_ms * 500000 +
				(int64_t)(rnd %
					  ((uint64_t)o->interval_ms * 1000000 +
					   1));
			if (nw == o->samples)
				end = written[nw] + dl_ns;
			continue;
		}
		if (now >= end)
			break;
		ret = tail_line(&in, nw < o->samples ? next : end, &line);
		if (ret < 0) {
			say("reading tail: %s", strerror(-ret));
			goto out;
		}
		if (line == 0) {
			if (in.eof) {
				say("tail ended early");
				ret = -EPIPE;
				goto out;
			}
			continue;
		}
		/* Lines are numbered from 2 here: 1 is "start". */
		if (line != got + 2 || line - 1 > nw) {
			say("tail printed line %ld after line %ld (%ld "
			    "written)",
			    line - 1, got, nw);
			ret = -EPROTO;
			goto out;
		}
		got++;
		arrived[got] = now_ns();
	}
	for (i = 1; i <= o->samples; i++) {
		if (i <= got && arrived[i] - written[i] < dl_ns)
			printf("%ld %.4f ok\n", i,
			       (double)(arrived[i] - written[i]) / 1e6);
		else
			printf("%ld %.3f deadline\n", i,
			       (double)o->deadline_ms);
	}
	ret = 0;
out:
	if (pid > 0) {
		kill(pid, SIGTERM);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (in.fd >= 0)
		close(in.fd);
	if (in.out && fclose(in.out) != 0 && ret == 0) {
		ret = -errno;
		say("%s: %s", o->out, strerror(-ret));
	}
	free(written);
	free(arrived);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vis-probe stat [-n K] [-d DEADLINE_MS] [-b BUDGET_S] "
		"NATIVE_DIR VIEW_DIR\n"
		"       vis-probe tail [-n K] [-d DEADLINE_MS] [-i "
		"INTERVAL_MS] "
		"[-s SLEEP] -o OUT NATIVE_FILE VIEW_FILE\n");
}

int main(int argc, char **argv)
{
	struct opts o = {.samples = 100,
			 .deadline_ms = 5000,
			 .budget_s = 0,
			 .interval_ms = 100,
			 .tail_sleep = "0.1",
			 .out = NULL};
	const char *mode;
	int c, ret;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	mode = argv[1];
	if (strcmp(mode, "stat") != 0 && strcmp(mode, "tail") != 0) {
		usage(stderr);
		return 2;
	}
	optind = 2;
	while ((c = getopt(argc, argv, "n:d:b:i:s:o:")) != -1) {
		switch (c) {
		case 'n':
			ret = parse_uint(optarg, VIS_MAX_SAMPLES, &o.samples);
			break;
		case 'd':
			ret = parse_uint(optarg, VIS_MAX_DEADLINE_MS,
					 &o.deadline_ms);
			break;
		case 'b':
			ret = parse_uint(optarg, LONG_MAX / 1000000000,
					 &o.budget_s);
			break;
		case 'i':
			ret = parse_uint(optarg, VIS_MAX_DEADLINE_MS,
					 &o.interval_ms);
			break;
		case 's':
			o.tail_sleep = optarg;
			ret = 0;
			break;
		case 'o':
			o.out = optarg;
			ret = 0;
			break;
		default:
			ret = -EINVAL;
			break;
		}
		if (ret < 0) {
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2 || o.samples < 1 || o.deadline_ms < 1 ||
	    (strcmp(mode, "tail") == 0 && !o.out)) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(mode, "stat") == 0)
		ret = run_stat(&o, argv[optind], argv[optind + 1]);
	else
		ret = run_tail(&o, argv[optind], argv[optind + 1]);
	return ret < 0 ? 1 : 0;
}
