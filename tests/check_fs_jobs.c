/* SPDX-License-Identifier: MIT */
/*
 * Suite fs_jobs: the FUSE-free parts of jobs/ (fs_jobs_store.c): job
 * ends and their status and exit files, the frames a job takes, the
 * output store (memory, spill, bounds, reads at any offset) and the job
 * table (ids, latest, eviction of the oldest finished jobs). What a write
 * to exec becomes is check_fs_jobs_cmd.c's.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "common/proto_exec.h"
#include "common/xalloc.h"
#include "fs/fs_jobs_i.h"
#include "tests/check_suites.h"
#include "tests/tcase_table.h"
#include "tests/helpers.h"

/* ---- job ends, status and exit files ------------------------------------- */

static struct fs_job *job(const char *name)
{
	return fs_job_new(name, name, "{}\n", 3, 1000, "/nonexistent", 1024);
}

static const char *status(struct fs_job *j)
{
	static char line[FS_JOB_MSG_MAX + 128];
	size_t n;

	pthread_mutex_lock(&j->lock);
	n = fs_job_status_line(j, line, sizeof(line));
	pthread_mutex_unlock(&j->lock);
	ck_assert_uint_eq(n, strlen(line));
	return line;
}

static int exit_text(struct fs_job *j, char *buf, size_t size)
{
	int rc;

	pthread_mutex_lock(&j->lock);
	rc = fs_job_exit_text(j, buf, size);
	pthread_mutex_unlock(&j->lock);
	return rc;
}

START_TEST(status_each_outcome)
{
	struct fs_job *j;
	char text[32];

	j = job("a");
	ck_assert_str_eq(status(j), "running\n");
	ck_assert_int_eq(exit_text(j, text, sizeof(text)), -EAGAIN);
	fs_job_end(j, FS_JOB_ST_EXITED, 3, NULL, NULL);
	ck_assert_str_eq(status(j), "exited 3\n");
	ck_assert_int_eq(exit_text(j, text, sizeof(text)), 2);
	ck_assert_str_eq(text, "3\n");
	/* the first end stays */
	fs_job_end(j, FS_JOB_ST_CANCELLED, 0, NULL, NULL);
	ck_assert_str_eq(status(j), "exited 3\n");
	fs_job_unref(j);

	j = job("b");
	fs_job_end(j, FS_JOB_ST_EXITED, -1, NULL, NULL);
	ck_assert_str_eq(status(j), "exited -1\n");
	ck_assert_int_eq(exit_text(j, text, sizeof(text)), 3);
	ck_assert_str_eq(text, "-1\n");
	fs_job_unref(j);

	j = job("c");
	fs_job_end(j, FS_JOB_ST_FAILED, 0, "timeoutExceeded",
		   "exceeded its 300ms timeout");
	ck_assert_str_eq(
		status(j),
		"failed timeoutExceeded: exceeded its 300ms timeout\n");
	ck_assert_int_eq(exit_text(j, text, sizeof(text)), -EIO);
	fs_job_unref(j);

	j = job("d");
	fs_job_end(j, FS_JOB_ST_CANCELLED, 0, NULL, NULL);
	ck_assert_str_eq(status(j), "cancelled\n");
	ck_assert_int_eq(exit_text(j, text, sizeof(text)), -ECANCELED);
	fs_job_unref(j);

	j = job("e");
	fs_job_end(j, FS_JOB_ST_UNKNOWN, 0, NULL, NULL);
	ck_assert_str_eq(status(j), "unknown\n");
	ck_assert_int_eq(exit_text(j, text, sizeof(text)), -EIO);
	fs_job_unref(j);
}
END_TEST

START_TEST(status_failed_one_line)
{
	char msg[2 * FS_JOB_MSG_MAX];
	struct fs_job *j;
	const char *line;

	j = job("a");
	fs_job_end(j, FS_JOB_ST_FAILED, 0, "spawnFailed",
		   "no such\nfile\r\tor directory\n");
	ck_assert_str_eq(status(j),
			 "failed spawnFailed: no such file  or directory\n");
	fs_job_unref(j);

	/* an empty code still reads as a code */
	j = job("b");
	fs_job_end(j, FS_JOB_ST_FAILED, 0, "", "gone");
	ck_assert_str_eq(status(j), "failed error: gone\n");
	fs_job_unref(j);

	/* a long message is cut, the line still ends once */
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	j = job("c");
	fs_job_end(j, FS_JOB_ST_FAILED, 0, "waitFailed", msg);
	line = status(j);
	ck_assert_uint_eq(strlen(line),
			  strlen("failed waitFailed: ") + FS_JOB_MSG_MAX + 1);
	ck_assert_ptr_eq(strchr(line, '\n'), line + strlen(line) - 1);
	fs_job_unref(j);
}
END_TEST

static void frame(struct proto_frame *f, enum proto_frame_type t, uint64_t seq,
		  const char *data)
{
	memset(f, 0, sizeof(*f));
	f->type = t;
	f->seq = seq;
	f->data = (unsigned char *)data;
	f->len = strlen(data);
}

static char *read_all(struct fs_store *s)
{
	char *p = calloc(1, s->size + 1);
	size_t got = 0;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(fs_store_read(s, p, s->size, 0, &got), 0);
	ck_assert_uint_eq(got, s->size);
	return p;
}

START_TEST(poll_frames_in_order)
{
	struct proto_frame fr[4];
	struct proto_job_poll p;
	struct fs_job *j = job("a");
	char *out, *err;

	memset(&p, 0, sizeof(p));
	p.running = true;
	p.frames = fr;
	frame(&fr[0], PROTO_FRAME_STDOUT, 0, "one\n");
	frame(&fr[1], PROTO_FRAME_STDERR, 1, "warn\n");
	/* seq 2..4 were dropped by the agent's output cap: a gap */
	frame(&fr[2], PROTO_FRAME_STDOUT, 5, "two\n");
	p.nframes = 3;
	pthread_mutex_lock(&j->lock);
	ck_assert(fs_job_apply_poll(j, &p));
	ck_assert_uint_eq(j->last_seq, 5);
	ck_assert_int_eq(j->state, FS_JOB_ST_RUNNING);
	pthread_mutex_unlock(&j->lock);

	/* An answer that repeats frames (a replayed sinceSeq) adds only the
	 * new ones. */
	frame(&fr[0], PROTO_FRAME_STDOUT, 5, "two\n");
	frame(&fr[1], PROTO_FRAME_STDOUT, 6, "three\n");
	p.nframes = 2;
	pthread_mutex_lock(&j->lock);
	ck_assert(fs_job_apply_poll(j, &p));
	pthread_mutex_unlock(&j->lock);

	/* nothing new, still running: no change */
	p.nframes = 0;
	pthread_mutex_lock(&j->lock);
	ck_assert(!fs_job_apply_poll(j, &p));
	pthread_mutex_unlock(&j->lock);

	p.running = false;
	p.has_exit = true;
	p.exit_code = 2;
	p.truncated = true;
	pthread_mutex_lock(&j->lock);
	ck_assert(fs_job_apply_poll(j, &p));
	ck_assert(j->truncated);
	pthread_mutex_unlock(&j->lock);
	/* the agent dropped output: the status says so */
	ck_assert_str_eq(status(j), "exited 2 (output truncated)\n");

	out = read_all(&j->out);
	err = read_all(&j->err);
	ck_assert_str_eq(out, "one\ntwo\nthree\n");
	ck_assert_str_eq(err, "warn\n");
	free(out);
	free(err);
	fs_job_unref(j);
}
END_TEST

/* A new job NAME given the poll answer P: its status reads WANT. */
static void expect_poll_status(const char *name, const struct proto_job_poll *p,
			       const char *want)
{
	struct fs_job *j = job(name);

	pthread_mutex_lock(&j->lock);
	ck_assert(fs_job_apply_poll(j, p));
	pthread_mutex_unlock(&j->lock);
	ck_assert_str_eq(status(j), want);
	fs_job_unref(j);
}

START_TEST(poll_ends)
{
	struct proto_job_poll p = {.has_error = true,
				   .err_code = (char *)"cancelled",
				   .err_message =
					   (char *)"the job was cancelled"};

	expect_poll_status("a", &p, "cancelled\n");

	p.err_code = (char *)"timeoutExceeded";
	p.err_message = (char *)"exceeded its 300ms timeout";
	expect_poll_status(
		"b", &p,
		"failed timeoutExceeded: exceeded its 300ms timeout\n");

	/* not running, but neither an exit nor an error: unknown */
	memset(&p, 0, sizeof(p));
	expect_poll_status("c", &p, "unknown\n");
}
END_TEST

/* ---- the output store ---------------------------------------------------- */

static char *spool;

static void spool_setup(void)
{
	spool = th_tmpdir("fs-jobs");
}

static void spool_teardown(void)
{
	th_rmtree(spool);
	free(spool);
	spool = NULL;
}

/* Entries in the spool directory besides . and .. */
static int spool_entries(void)
{
	DIR *d = opendir(spool);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* Byte i of the test pattern. */
static char pat(uint64_t i)
{
	return (char)('a' + (i * 7 + i / 251) % 26);
}

static void fill(struct fs_store *s, uint64_t total, size_t chunk)
{
	char *b = malloc(chunk);
	uint64_t at = 0;

	ck_assert_ptr_nonnull(b);
	while (at < total) {
		size_t n = total - at < chunk ? (size_t)(total - at) : chunk;
		size_t i;

		for (i = 0; i < n; i++)
			b[i] = pat(at + i);
		ck_assert_int_eq(fs_store_append(s, b, n), 0);
		at += n;
	}
	free(b);
}

static void check_range(struct fs_store *s, uint64_t off, size_t n)
{
	char *b = malloc(n + 1);
	size_t got = 99, want, i;

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(fs_store_read(s, b, n, off, &got), 0);
	want = off >= s->size	   ? 0
	       : s->size - off < n ? (size_t)(s->size - off)
				   : n;
	ck_assert_uint_eq(got, want);
	for (i = 0; i < got; i++)
		ck_assert_msg(b[i] == pat(off + i), "byte %llu differs",
			      (unsigned long long)(off + i));
	free(b);
}

START_TEST(store_memory_only)
{
	struct fs_store s;

	fs_store_init(&s, spool, 4096, FS_STORE_MAX);
	fill(&s, 1000, 33);
	ck_assert_uint_eq(s.size, 1000);
	ck_assert_int_eq(s.fd, -1);
	ck_assert_uint_le(s.mem_cap, 4096);
	check_range(&s, 0, 1000);
	check_range(&s, 999, 10);
	check_range(&s, 500, 7);
	check_range(&s, 1000, 10);
	check_range(&s, 5000, 10);
	ck_assert_int_eq(spool_entries(), 0);
	fs_store_cleanup(&s);
}
END_TEST

START_TEST(store_spills_past_threshold)
{
	struct fs_store s;
	uint64_t off;

	fs_store_init(&s, spool, 16, FS_STORE_MAX);
	fill(&s, 100, 7);
	ck_assert_uint_eq(s.size, 100);
	ck_assert_uint_eq(s.mem_len, 16);
	ck_assert_int_ge(s.fd, 0);
	/* every offset and a few lengths, across the boundary */
	for (off = 0; off <= 101; off++) {
		check_range(&s, off, 1);
		check_range(&s, off, 5);
		check_range(&s, off, 40);
	}
	/* the spill file is unlinked: nothing is left in the directory */
	ck_assert_int_eq(spool_entries(), 0);
	fs_store_cleanup(&s);
	ck_assert_int_eq(s.fd, -1);
	ck_assert_uint_eq(s.size, 0);
}
END_TEST

START_TEST(store_memory_bounded)
{
	const uint64_t total = 6ULL * 1024 * 1024 + 123;
	struct fs_store s;

	fs_store_init(&s, spool, 64 * 1024, FS_STORE_MAX);
	fill(&s, total, 65536);
	ck_assert_uint_eq(s.size, total);
	ck_assert_uint_le(s.mem_cap, 64 * 1024);
	ck_assert_uint_eq(s.mem_len, 64 * 1024);
	check_range(&s, 0, 100);
	check_range(&s, 64 * 1024 - 50, 100);
	check_range(&s, 3 * 1024 * 1024 + 17, 131072);
	check_range(&s, total - 10, 131072);
	check_range(&s, total, 10);
	ck_assert_int_eq(spool_entries(), 0);
	fs_store_cleanup(&s);
}
END_TEST

START_TEST(store_total_bound)
{
	struct fs_store s;
	size_t got;
	char b[32];

	fs_store_init(&s, spool, 4, 10);
	ck_assert_int_eq(fs_store_append(&s, "0123456", 7), 0);
	/* all or nothing: what does not fit is not kept in part */
	ck_assert_int_eq(fs_store_append(&s, "789abc", 6), -EFBIG);
	ck_assert_uint_eq(s.size, 7);
	/* and the store goes on with what fits */
	ck_assert_int_eq(fs_store_append(&s, "789", 3), 0);
	ck_assert_uint_eq(s.size, 10);
	ck_assert_int_eq(fs_store_append(&s, "x", 1), -EFBIG);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 0, &got), 0);
	ck_assert_uint_eq(got, 10);
	ck_assert_int_eq(memcmp(b, "0123456789", 10), 0);
	fs_store_cleanup(&s);
}
END_TEST

START_TEST(store_spill_failure)
{
	char *missing = xasprintf("%s/missing", spool);
	struct fs_store s;
	size_t got;
	char b[16];

	fs_store_init(&s, missing, 4, FS_STORE_MAX);
	ck_assert_int_eq(fs_store_append(&s, "ab", 2), 0);
	/* the part that would spill cannot be: nothing of it is kept, not
	 * even what fitted in memory, so a later try adds it whole */
	ck_assert_int_eq(fs_store_append(&s, "cdef", 4), -ENOENT);
	ck_assert_uint_eq(s.size, 2);
	ck_assert_uint_eq(s.mem_len, 2);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 0, &got), 0);
	ck_assert_uint_eq(got, 2);
	ck_assert_int_eq(memcmp(b, "ab", 2), 0);
	/* the directory appears: the same bytes go in */
	ck_assert_int_eq(mkdir(missing, 0700), 0);
	ck_assert_int_eq(fs_store_append(&s, "cdef", 4), 0);
	ck_assert_int_eq(fs_store_append(&s, "g", 1), 0);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 0, &got), 0);
	ck_assert_uint_eq(got, 7);
	ck_assert_int_eq(memcmp(b, "abcdefg", 7), 0);
	fs_store_cleanup(&s);
	free(missing);
}
END_TEST

START_TEST(store_gaps)
{
	struct fs_store s;
	size_t got;
	char b[64];

	fs_store_init(&s, spool, 8, FS_STORE_MAX);
	/* lost at the start (in memory), then bytes, then lost in the
	 * spilled part, then bytes again */
	ck_assert_int_eq(fs_store_skip(&s, 5), 0);
	ck_assert_int_eq(fs_store_append(&s, "abcdef", 6), 0);
	ck_assert_int_eq(fs_store_skip(&s, 10), 0);
	ck_assert_int_eq(fs_store_append(&s, "XYZ", 3), 0);
	ck_assert_uint_eq(s.size, 24);
	ck_assert_uint_eq(s.ngaps, 2);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 0, &got), -EIO);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 4, &got), -EIO);
	/* a read stops short of a gap */
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 5, &got), 0);
	ck_assert_uint_eq(got, 6);
	ck_assert_int_eq(memcmp(b, "abcdef", 6), 0);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 11, &got), -EIO);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 20, &got), -EIO);
	ck_assert_int_eq(fs_store_read(&s, b, sizeof(b), 21, &got), 0);
	ck_assert_uint_eq(got, 3);
	ck_assert_int_eq(memcmp(b, "XYZ", 3), 0);
	/* a gap right after a gap extends it */
	ck_assert_int_eq(fs_store_skip(&s, 2), 0);
	ck_assert_int_eq(fs_store_skip(&s, 2), 0);
	ck_assert_uint_eq(s.ngaps, 3);
	ck_assert_uint_eq(s.gaps[2].off, 24);
	ck_assert_uint_eq(s.gaps[2].len, 4);
	fs_store_cleanup(&s);
}
END_TEST

static struct fs_job *spool_job(void)
{
	return fs_job_new("j", "j", "{}\n", 3, 1000, spool, 16);
}

static void off_frame(struct proto_frame *f, enum proto_frame_type t,
		      uint64_t seq, uint64_t off, const char *data)
{
	frame(f, t, seq, data);
	f->has_off = true;
	f->off = off;
}

START_TEST(take_frames_with_offsets)
{
	struct fs_job *j = spool_job();
	struct proto_frame f;
	struct proto_job_poll p;
	size_t got;
	char b[64];

	pthread_mutex_lock(&j->lock);
	/* the agent had dropped the first 4 bytes (another client took
	 * them, or this mount before a remount) */
	off_frame(&f, PROTO_FRAME_STDOUT, 3, 4, "efgh");
	ck_assert_int_eq(fs_job_take_frame(j, &f), 1);
	ck_assert(j->truncated);
	ck_assert_uint_eq(j->out.size, 8);
	/* an overlap adds only what is new */
	off_frame(&f, PROTO_FRAME_STDOUT, 4, 6, "ghij");
	ck_assert_int_eq(fs_job_take_frame(j, &f), 1);
	ck_assert_uint_eq(j->out.size, 10);
	/* an older seq is nothing new */
	off_frame(&f, PROTO_FRAME_STDOUT, 4, 10, "zz");
	ck_assert_int_eq(fs_job_take_frame(j, &f), 0);
	/* the end says stderr had 3 bytes the mount never got */
	memset(&p, 0, sizeof(p));
	p.has_exit = true;
	p.has_bytes = true;
	p.stdout_bytes = 10;
	p.stderr_bytes = 3;
	ck_assert(fs_job_take_end(j, &p));
	ck_assert_uint_eq(j->err.size, 3);
	ck_assert_int_eq(fs_store_read(&j->out, b, sizeof(b), 0, &got), -EIO);
	ck_assert_int_eq(fs_store_read(&j->out, b, sizeof(b), 4, &got), 0);
	ck_assert_uint_eq(got, 6);
	ck_assert_int_eq(memcmp(b, "efghij", 6), 0);
	ck_assert_int_eq(fs_store_read(&j->err, b, sizeof(b), 0, &got), -EIO);
	pthread_mutex_unlock(&j->lock);
	ck_assert_str_eq(status(j), "exited 0 (output truncated)\n");
	fs_job_unref(j);
}
END_TEST

START_TEST(take_frame_that_cannot_be_kept)
{
	char *missing = xasprintf("%s/missing", spool);
	struct fs_job *j = fs_job_new("j", "j", "{}\n", 3, 1000, missing, 4);
	struct proto_frame f;

	pthread_mutex_lock(&j->lock);
	frame(&f, PROTO_FRAME_STDOUT, 0, "ab");
	ck_assert_int_eq(fs_job_take_frame(j, &f), 1);
	/* past memory, the spill directory is missing: not taken, and the
	 * job says why; seq stays, so the next poll asks for it again */
	frame(&f, PROTO_FRAME_STDOUT, 1, "cdef");
	ck_assert_int_eq(fs_job_take_frame(j, &f), -ENOENT);
	ck_assert_int_eq(j->keep_err, ENOENT);
	ck_assert_uint_eq(j->last_seq, 0);
	ck_assert_uint_eq(j->out.size, 2);
	ck_assert_int_eq(mkdir(missing, 0700), 0);
	ck_assert_int_eq(fs_job_take_frame(j, &f), 1);
	ck_assert_int_eq(j->keep_err, 0);
	ck_assert_uint_eq(j->last_seq, 1);
	ck_assert_uint_eq(j->out.size, 6);
	pthread_mutex_unlock(&j->lock);
	fs_job_unref(j);
	free(missing);
}
END_TEST

START_TEST(status_stale_and_truncated)
{
	struct fs_job *j = spool_job();
	char text[64];

	pthread_mutex_lock(&j->lock);
	j->stale = true;
	pthread_mutex_unlock(&j->lock);
	ck_assert_str_eq(status(j), "unknown\n");
	pthread_mutex_lock(&j->lock);
	ck_assert_int_eq(fs_job_exit_text(j, text, sizeof(text)), -EIO);
	/* the agent answers again */
	j->stale = false;
	ck_assert_int_eq(fs_job_exit_text(j, text, sizeof(text)), -EAGAIN);
	pthread_mutex_unlock(&j->lock);
	ck_assert_str_eq(status(j), "running\n");
	pthread_mutex_lock(&j->lock);
	j->truncated = true;
	fs_job_end(j, FS_JOB_ST_FAILED, 0, "timeoutExceeded", "exceeded\nit");
	pthread_mutex_unlock(&j->lock);
	ck_assert_str_eq(status(j),
			 "failed timeoutExceeded: exceeded it (output "
			 "truncated)\n");
	fs_job_unref(j);
}
END_TEST

/* ---- the job table ------------------------------------------------------- */

static struct fs_job *add(struct fs_jobs *js, const char *name,
			  const char *prefix, bool ended)
{
	struct fs_job *j = fs_job_new(name, "", "{}\n", 3, 1000, js->spool_dir,
				      js->mem_max);

	if (ended)
		fs_job_end(j, FS_JOB_ST_EXITED, 0, NULL, NULL);
	ck_assert_int_eq(fs_jobs_add(js, j, prefix), 0);
	fs_job_unref(j);
	return j;
}

static void end(struct fs_jobs *js, const char *name)
{
	struct fs_job *j = fs_jobs_find(js, name);

	ck_assert_ptr_nonnull(j);
	pthread_mutex_lock(&j->lock);
	fs_job_end(j, FS_JOB_ST_EXITED, 0, NULL, NULL);
	pthread_mutex_unlock(&j->lock);
	fs_job_unref(j);
}

/* The names, oldest first, joined with spaces. */
static char *names(struct fs_jobs *js)
{
	struct buf b = BUF_INIT(0);
	char **v;
	size_t n, i;

	fs_jobs_names(js, &v, &n);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(buf_printf(&b, "%s%s", i ? " " : "", v[i]), 0);
		free(v[i]);
	}
	free(v);
	return buf_take(&b, NULL);
}

static void assert_names(struct fs_jobs *js, const char *want)
{
	char *got = names(js);

	ck_assert_str_eq(got, want);
	free(got);
}

static void assert_latest(struct fs_jobs *js, const char *want)
{
	char name[FS_JOB_NAME_MAX + 1];
	struct fs_job *j;

	ck_assert(fs_jobs_latest(js, name, sizeof(name)));
	ck_assert_str_eq(name, want);
	j = fs_jobs_find(js, "latest");
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(j->name, want);
	fs_job_unref(j);
}

START_TEST(table_ids_and_latest)
{
	struct fs_jobs *js = fs_jobs_new(spool, FS_JOBS_MAX, 1024);
	char name[FS_JOB_NAME_MAX + 1];
	struct fs_job *j;

	ck_assert(!fs_jobs_latest(js, name, sizeof(name)));
	ck_assert_ptr_null(fs_jobs_find(js, "latest"));
	assert_names(js, "");

	add(js, "0b7c6f8e-2a7d-4c55-9a0e-1f7b0e1c2d3e", "job", false);
	assert_latest(js, "0b7c6f8e-2a7d-4c55-9a0e-1f7b0e1c2d3e");
	add(js, "", "unknown", true);
	assert_latest(js, "unknown-1");
	add(js, "", "native", true);
	assert_latest(js, "native-2");
	/* an id that is taken, or cannot be a directory name */
	add(js, "native-2", "job", false);
	add(js, "../etc", "job", false);
	add(js, "latest", "job", false);
	add(js, "a/b", "job", false);
	assert_names(js, "0b7c6f8e-2a7d-4c55-9a0e-1f7b0e1c2d3e unknown-1 "
			 "native-2 job-3 job-4 job-5 job-6");
	assert_latest(js, "job-6");

	j = fs_jobs_find(js, "unknown-1");
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(j->name, "unknown-1");
	fs_job_unref(j);
	ck_assert_ptr_null(fs_jobs_find(js, "unknown-9"));
	ck_assert_ptr_null(fs_jobs_find(js, ""));

	/* a short buffer gets a cut name, never an overflow */
	ck_assert(fs_jobs_latest(js, name, 4));
	ck_assert_str_eq(name, "job");
	fs_jobs_destroy(js);
}
END_TEST

START_TEST(table_name_rules)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{"abc-DEF_0.9", true}, {"unknown-1", true}, {"", false},
		{".", false},	       {"..", false},	    {"latest", false},
		{"a/b", false},	       {"a b", false},	    {"a\nb", false},
	};
	char longname[FS_JOB_NAME_MAX + 2];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(fs_job_name_ok(cases[i].name) == cases[i].ok,
			      "%s", cases[i].name);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert(!fs_job_name_ok(longname));
	longname[FS_JOB_NAME_MAX] = '\0';
	ck_assert(fs_job_name_ok(longname));
}
END_TEST

START_TEST(table_evicts_oldest_finished)
{
	/* Each step ends a job (when end is set), adds one (of kind "job",
	 * already ended or not), then expects the names and the latest (when
	 * set). */
	static const struct {
		const char *end, *add;
		bool ended;
		const char *names, *latest;
	} steps[] = {
		{NULL, "a", true, NULL, NULL},
		{NULL, "b", false, NULL, NULL},
		{NULL, "c", true, "a b c", NULL},
		/* a fourth job: the oldest finished one (a) goes */
		{NULL, "d", true, "b c d", NULL},
		/* b still runs: c is the oldest finished one */
		{NULL, "e", false, "b d e", NULL},
		{NULL, "f", false, "b e f", NULL},
		/* only running jobs are older: nothing can go, the table
		 * grows */
		{NULL, "g", true, "b e f g", "g"},
		/* once one ends, the next addition trims back to the bound */
		{"e", "h", false, "b f h", NULL},
		{"b", "i", false, "f h i", "i"},
	};
	struct fs_jobs *js = fs_jobs_new(spool, 3, 1024);
	size_t i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (steps[i].end != NULL)
			end(js, steps[i].end);
		add(js, steps[i].add, "job", steps[i].ended);
		if (steps[i].names != NULL)
			assert_names(js, steps[i].names);
		if (steps[i].latest != NULL)
			assert_latest(js, steps[i].latest);
	}
	fs_jobs_destroy(js);
}
END_TEST

START_TEST(table_bound_256)
{
	struct fs_jobs *js = fs_jobs_new(spool, FS_JOBS_MAX, 1024);
	char **v;
	size_t n, i;

	for (i = 0; i < 300; i++)
		add(js, "", "native", true);
	fs_jobs_names(js, &v, &n);
	ck_assert_uint_eq(n, FS_JOBS_MAX);
	/* the 44 oldest went; the rest keep their order */
	ck_assert_str_eq(v[0], "native-45");
	ck_assert_str_eq(v[n - 1], "native-300");
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
	assert_latest(js, "native-300");
	ck_assert_ptr_null(fs_jobs_find(js, "native-44"));
	fs_jobs_destroy(js);
}
END_TEST

START_TEST(table_evicted_job_stays_readable)
{
	struct fs_jobs *js = fs_jobs_new(spool, 1, 4);
	struct fs_job *j, *held;
	char *out;

	j = add(js, "a", "job", false);
	pthread_mutex_lock(&j->lock);
	ck_assert_int_eq(fs_store_append(&j->out, "spilled output", 14), 0);
	fs_job_end(j, FS_JOB_ST_EXITED, 0, NULL, NULL);
	pthread_mutex_unlock(&j->lock);
	/* an open file holds it */
	held = fs_jobs_find(js, "a");
	ck_assert_ptr_eq(held, j);
	add(js, "b", "job", true);
	assert_names(js, "b");
	ck_assert_ptr_null(fs_jobs_find(js, "a"));
	out = read_all(&held->out);
	ck_assert_str_eq(out, "spilled output");
	free(out);
	fs_job_unref(held);
	fs_jobs_destroy(js);
	ck_assert_int_eq(spool_entries(), 0);
}
END_TEST

START_TEST(table_adopts)
{
	struct fs_jobs *js = fs_jobs_new(spool, 3, 1024);
	struct fs_job *a, *got, *dup;

	add(js, "mine", "job", false);
	/* a job of the agent's listing: in the table, latest unchanged */
	a = fs_job_new("theirs", "theirs", "{}\n", 3, 1000, spool, 1024);
	a->adopted = true;
	a->followed = false;
	got = fs_jobs_adopt(js, a);
	ck_assert_ptr_eq(got, a);
	fs_job_unref(got);
	fs_job_unref(a);
	assert_names(js, "mine theirs");
	assert_latest(js, "mine");
	/* adopting a name the table has gives the table's job */
	dup = fs_job_new("theirs", "theirs", "{}\n", 3, 1000, spool, 1024);
	got = fs_jobs_adopt(js, dup);
	ck_assert_ptr_ne(got, dup);
	ck_assert_ptr_eq(got, a);
	fs_job_unref(got);
	fs_job_unref(dup);
	assert_names(js, "mine theirs");
	/* an adopted job nobody follows makes room like an ended one; a
	 * running job started here does not */
	add(js, "x", "job", false);
	add(js, "y", "job", false);
	assert_names(js, "mine x y");
	assert_latest(js, "y");
	fs_jobs_destroy(js);
}
END_TEST

void fs_jobs_cases(Suite *s)
{
	TCASE_TABLE(s, "status", NULL, NULL, 0, status_each_outcome,
		    status_failed_one_line, poll_frames_in_order, poll_ends);
	TCASE_TABLE(s, "take", spool_setup, spool_teardown, 0,
		    take_frames_with_offsets, take_frame_that_cannot_be_kept,
		    status_stale_and_truncated);
	TCASE_TABLE(s, "store", spool_setup, spool_teardown, 0,
		    store_memory_only, store_spills_past_threshold,
		    store_memory_bounded, store_total_bound,
		    store_spill_failure, store_gaps);
	TCASE_TABLE(s, "table", spool_setup, spool_teardown, 0,
		    table_ids_and_latest, table_name_rules,
		    table_evicts_oldest_finished, table_bound_256,
		    table_evicted_job_stays_readable, table_adopts);
}
