/* SPDX-License-Identifier: MIT */
/*
 * sandboxctl exec: run one command in a sandbox as a job of its agent and
 * behave like the command: its stdout on stdout and its stderr on stderr
 * as they come, its exit status as ours (man/sandboxctl.1, "exec").
 *
 * The job is started with flow control (doc/protocol-ext.md 10): the agent
 * keeps every byte the client has not acknowledged and pauses the job
 * while its window is full, and a poll from seq N acknowledges what came
 * up to N. Each poll asks for at most POLL_MAX_BYTES of answer and its
 * frames are written out one at a time as they are decoded, so memory is
 * one answer whatever the output, and the acknowledgement (the next poll)
 * is only sent once the bytes were written: a slow reader of our stdout
 * slows the job down, as a pipe would.
 *
 * Signals: the main thread keeps SIGINT, SIGTERM and SIGHUP blocked and a
 * thread of their own takes them with sigwait, so that a cancel goes out
 * at once even while the main thread waits in a long-poll. The first one
 * cancels the job (the agent's cancel route); the main thread then sees
 * the job end and exits 128 + the signal. A second one exits at once.
 *
 * Every wait is bounded: the agent's start (local_ctl's and the transport's
 * readiness deadlines), each request (the response deadline), an agent
 * that does not answer (SILENCE_MS, sooner when its process is gone), and
 * a job the agent still calls running well after its own timeout.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sleep.h"
#include "common/xalloc.h"
#include "common/strv.h"
#include "ctl/ctl.h"
#include "client/local_state.h"

/* One exchange with the agent in total (the long-poll included). */
#define RESPONSE_MS 30000L
/* How long an extension agent holds a poll without news. */
#define LONGPOLL_MS 10000L
/* The most JSON one poll answer carries (the agent uses at least 64 KiB). */
#define POLL_MAX_BYTES (2UL * 1024 * 1024)
/* A v1 agent answers at once: poll from this often to this seldom. */
#define POLL_MIN_MS 50L
#define POLL_MAX_MS 1000L
/* Retrying an agent that does not answer. */
#define RETRY_MIN_MS 200L
#define RETRY_MAX_MS 5000L
#define SILENCE_MS 30000L
/* The agent ends a job at its timeout; past this much more, we stop. */
#define END_GRACE_MS 60000LL
/* Largest --timeout: milliseconds must stay below 2^53. */
#define TIMEOUT_MAX_S 9007199254740ULL

/* "sandboxctl: ", what, fmt's text and a newline on stderr. */
static void __attribute__((format(printf, 2, 0)))
vsay(const char *what, const char *fmt, va_list ap)
{
	fprintf(stderr, "sandboxctl: %s", what);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* A message of sandboxctl's own on stderr. */
static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
}

/* ---- the command line ------------------------------------------------------ */

struct exec_args {
	const char *name;
	uint64_t timeout_ms;
	const char *cwd;
	char **env; /* "K=V", heap */
	size_t envc;
	char **argv; /* borrowed from the process's argv */
	size_t argc;
};

static void args_cleanup(struct exec_args *a)
{
	strv_free(a->env, a->envc);
}

static int __attribute__((format(printf, 1, 2))) usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay("exec: ", fmt, ap);
	va_end(ap);
	fputs("usage: sandboxctl exec NAME [--timeout SECONDS] [--cwd DIR] "
	      "[--env K=V]... -- CMD [ARGS...]\n",
	      stderr);
	return CTL_EXEC_NOT_STARTED;
}

/* "--opt value" or "--opt=value": the value, advancing *i past it. */
static const char *opt_value(int argc, char **argv, int *i, const char *opt)
{
	size_t n = strlen(opt);
	const char *a = argv[*i];

	if (strncmp(a, opt, n) != 0)
		return NULL;
	if (a[n] == '=') {
		(*i)++;
		return a + n + 1;
	}
	if (a[n] != '\0' || *i + 1 >= argc)
		return NULL;
	*i += 2;
	return argv[*i - 1];
}

static bool is_opt(const char *a, const char *opt)
{
	size_t n = strlen(opt);

	return strncmp(a, opt, n) == 0 && (a[n] == '\0' || a[n] == '=');
}

static int add_env(struct exec_args *a, const char *kv)
{
	const char *eq = strchr(kv, '=');
	const char *val;

	if (eq == kv)
		return usage("--env '%s': the name is empty", kv);
	if (eq == NULL) {
		/* "--env K" passes K's value here, as docker run -e does. */
		val = getenv(kv);
		if (val == NULL)
			return usage(
				"--env %s: %s is not set here (use %s=VALUE)",
				kv, kv, kv);
		if (a->envc >= PROTO_EXEC_MAX_ENV)
			return usage("more than %d --env", PROTO_EXEC_MAX_ENV);
		a->env = xrealloc(a->env, (a->envc + 2) * sizeof(*a->env));
		a->env[a->envc++] = xasprintf("%s=%s", kv, val);
	} else {
		if (a->envc >= PROTO_EXEC_MAX_ENV)
			return usage("more than %d --env", PROTO_EXEC_MAX_ENV);
		a->env = xrealloc(a->env, (a->envc + 2) * sizeof(*a->env));
		a->env[a->envc++] = xstrdup(kv);
	}
	a->env[a->envc] = NULL;
	return 0;
}

/* NAME and the options in any order, then "--" or the command's first
 * word: everything after belongs to the command. */
static int parse(int argc, char **argv, struct exec_args *a)
{
	const char *v;
	char *end;
	int i = 1, rc;

	memset(a, 0, sizeof(*a));
	a->timeout_ms = (uint64_t)CTL_EXEC_DEFAULT_TIMEOUT_S * 1000;
	while (i < argc) {
		const char *arg = argv[i];

		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (is_opt(arg, "--timeout")) {
			unsigned long long s;

			v = opt_value(argc, argv, &i, "--timeout");
			if (v == NULL)
				return usage("--timeout needs SECONDS");
			errno = 0;
			s = strtoull(v, &end, 10);
			if (v[0] < '0' || v[0] > '9' || *end != '\0' ||
			    errno != 0 || s == 0 || s > TIMEOUT_MAX_S)
				return usage("--timeout '%s': want a whole "
					     "number of seconds from 1 to %llu",
					     v,
					     (unsigned long long)TIMEOUT_MAX_S);
			a->timeout_ms = (uint64_t)s * 1000;
			continue;
		}
		if (is_opt(arg, "--cwd")) {
			v = opt_value(argc, argv, &i, "--cwd");
			if (v == NULL || v[0] == '\0')
				return usage("--cwd needs a DIR");
			a->cwd = v;
			continue;
		}
		if (is_opt(arg, "--env")) {
			v = opt_value(argc, argv, &i, "--env");
			if (v == NULL || v[0] == '\0')
				return usage("--env needs K=V");
			rc = add_env(a, v);
			if (rc != 0)
				return rc;
			continue;
		}
		if (arg[0] == '-' && arg[1] != '\0')
			return usage("unknown option '%s' (a command that "
				     "starts with '-' goes after --)",
				     arg);
		if (a->name != NULL)
			break; /* the command's first word */
		a->name = arg;
		i++;
	}
	if (a->name == NULL)
		return usage("a sandbox NAME is needed");
	if (!local_state_id_valid(a->name))
		return usage("invalid sandbox name '%s': use 1 to %d letters, "
			     "digits, '_' or '-'",
			     a->name, LOCAL_ID_MAX);
	if (i >= argc)
		return usage("a command is needed after the sandbox name");
	if ((size_t)(argc - i) > PROTO_EXEC_MAX_ARGS)
		return usage("more than %d command words", PROTO_EXEC_MAX_ARGS);
	a->argv = argv + i;
	a->argc = (size_t)(argc - i);
	return 0;
}

/* ---- signals --------------------------------------------------------------- */

struct sigctl {
	pthread_mutex_t lock;
	pthread_cond_t idle; /* no cancel is being sent */
	sigset_t set; /* the signals the thread takes */
	int signo; /* the first signal, 0 until one came */
	bool have_job;
	char job_id[PROTO_JOB_ID_MAX + 1];
	bool cancel_sent;
	bool cancel_busy;
	bool closing; /* the transport is going away: send nothing */
	struct transport *t; /* set with have_job */
	const char *name;
};

static void send_cancel(struct sigctl *sc)
{
	struct sbx_error err;

	sbx_error_clear(&err);
	if (ac_job_cancel(sc->t, sc->name, sc->job_id, &err) < 0) {
		/* Ended already, and forgotten: nothing left to stop. */
		if (!(err.status == 404 &&
		      strstr(err.reason, PROTO_ERR_JOB_NOT_FOUND ":") !=
			      NULL)) {
			say("cannot cancel job %s: %s", sc->job_id, err.reason);
		}
	}
	pthread_mutex_lock(&sc->lock);
	sc->cancel_busy = false;
	pthread_cond_broadcast(&sc->idle);
	pthread_mutex_unlock(&sc->lock);
}

/* Claim the cancel when a signal came and a job is there to cancel. */
static bool cancel_due(struct sigctl *sc)
{
	if (sc->signo == 0 || !sc->have_job || sc->cancel_sent || sc->closing)
		return false;
	sc->cancel_sent = true;
	sc->cancel_busy = true;
	return true;
}

static void *cancel_main(void *arg)
{
	send_cancel(arg);
	return NULL;
}

static void *sig_main(void *arg)
{
	struct sigctl *sc = arg;
	pthread_attr_t detached;
	pthread_t th;
	bool go;
	int sig;

	pthread_attr_init(&detached);
	pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);

	for (;;) {
		if (sigwait(&sc->set, &sig) != 0)
			continue;
		pthread_mutex_lock(&sc->lock);
		if (sc->signo != 0) {
			/* The second one: leave now. The job may go on. */
			if (sc->have_job && !sc->closing)
				say("%s again: not waiting for job %s to be "
				    "cancelled",
				    strsignal(sig), sc->job_id);
			fflush(stderr);
			_exit(128 + sig);
		}
		sc->signo = sig;
		go = cancel_due(sc);
		pthread_mutex_unlock(&sc->lock);
		/* From another thread: this one must be back in sigwait
		 * for a second signal while the cancel waits for its
		 * answer. */
		if (go && pthread_create(&th, &detached, cancel_main, sc) != 0)
			send_cancel(sc);
	}
	return NULL;
}

static const int watched[3] = {SIGINT, SIGTERM, SIGHUP};

/* Block the signals that are not ignored (an ignored one stays ignored:
 * nohup, a background job of a script) and start the thread that takes
 * them. Before any other thread exists, so that all inherit the mask. */
static int sig_start(struct sigctl *sc, const char *name)
{
	struct sigaction old;
	pthread_t th;
	size_t i;
	int rc;

	memset(sc, 0, sizeof(*sc));
	pthread_mutex_init(&sc->lock, NULL);
	pthread_cond_init(&sc->idle, NULL);
	sc->name = name;
	sigemptyset(&sc->set);
	for (i = 0; i < 3; i++)
		if (sigaction(watched[i], NULL, &old) == 0 &&
		    old.sa_handler != SIG_IGN)
			sigaddset(&sc->set, watched[i]);
	if (sigisemptyset(&sc->set))
		return 0; /* all ignored: nothing to wait for */
	rc = pthread_sigmask(SIG_BLOCK, &sc->set, NULL);
	if (rc == 0)
		rc = pthread_create(&th, NULL, sig_main, sc);
	if (rc == 0)
		rc = pthread_detach(th);
	return -rc;
}

/* The job exists: a signal from now on cancels it (and one that came
 * already does now). */
static void sig_job(struct sigctl *sc, struct transport *t, const char *id)
{
	bool go;

	pthread_mutex_lock(&sc->lock);
	strlcpy_s(sc->job_id, id, sizeof(sc->job_id));
	sc->t = t;
	sc->have_job = true;
	go = cancel_due(sc);
	pthread_mutex_unlock(&sc->lock);
	if (go)
		send_cancel(sc);
}

/* Cancel the job now (our own reasons: a stdout that went away), unless
 * a signal did already. */
static void sig_cancel_now(struct sigctl *sc)
{
	bool go = false;

	pthread_mutex_lock(&sc->lock);
	if (sc->have_job && !sc->cancel_sent && !sc->closing) {
		sc->cancel_sent = true;
		sc->cancel_busy = true;
		go = true;
	}
	pthread_mutex_unlock(&sc->lock);
	if (go)
		send_cancel(sc);
}

static int sig_taken(struct sigctl *sc)
{
	int s;

	pthread_mutex_lock(&sc->lock);
	s = sc->signo;
	pthread_mutex_unlock(&sc->lock);
	return s;
}

/* No cancel from now on; wait for one on its way (its request has the
 * response deadline). */
static void sig_close(struct sigctl *sc)
{
	pthread_mutex_lock(&sc->lock);
	sc->closing = true;
	while (sc->cancel_busy)
		pthread_cond_wait(&sc->idle, &sc->lock);
	pthread_mutex_unlock(&sc->lock);
}

/* ---- output ---------------------------------------------------------------- */

struct follow {
	struct sigctl *sc;
	bool has_seq;
	uint64_t seq; /* the last frame taken: the next poll acknowledges it */
	uint64_t wrote[2]; /* bytes of stdout and stderr taken */
	uint64_t lost[2]; /* bytes the agent no longer had for us */
	int werr; /* a write failed: -errno */
	bool fresh; /* the last poll brought frames */
};

static int write_all(int fd, const unsigned char *p, size_t n)
{
	struct pollfd pfd = {fd, POLLOUT, 0};
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			/* A descriptor someone made non-blocking: wait for
			 * room as a blocking write would. */
			(void)poll(&pfd, 1, -1);
			continue;
		}
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int take_frame(void *arg, const struct proto_frame *f)
{
	struct follow *fl = arg;
	int s = f->type == PROTO_FRAME_STDERR ? 1 : 0;
	const unsigned char *p = f->data;
	size_t n = f->len;
	uint64_t skip;
	int rc;

	if (f->type != PROTO_FRAME_STDOUT && f->type != PROTO_FRAME_STDERR)
		return 0;
	if (f->has_off && f->off > fl->wrote[s]) {
		/* Acknowledged by another client and dropped before we
		 * asked (doc/protocol-ext.md 10): a hole we can only
		 * report. */
		fl->lost[s] += f->off - fl->wrote[s];
		fl->wrote[s] = f->off;
	} else if (f->has_off && f->off < fl->wrote[s]) {
		/* Seen already (an answer asked for again). */
		skip = fl->wrote[s] - f->off;
		if (skip >= n)
			n = 0;
		else {
			p += skip;
			n -= (size_t)skip;
		}
	}
	/* After a signal the job is being cancelled: its output no longer
	 * goes anywhere, as a terminal's after Ctrl-C. */
	if (n > 0 && sig_taken(fl->sc) == 0) {
		rc = write_all(s ? STDERR_FILENO : STDOUT_FILENO, p, n);
		if (rc < 0) {
			fl->werr = rc;
			return rc;
		}
	}
	fl->wrote[s] += n;
	fl->has_seq = true;
	fl->seq = f->seq;
	fl->fresh = true;
	return 0;
}

/* ---- the job's end ---------------------------------------------------------- */

static bool job_not_found(const struct sbx_error *e)
{
	return e->status == 404 &&
	       strstr(e->reason, PROTO_ERR_JOB_NOT_FOUND ":") != NULL;
}

/* "(os error N)" at the end of an agent's spawn message. */
static int os_error(const char *msg)
{
	const char *p = msg ? strstr(msg, "(os error ") : NULL;

	return p ? atoi(p + strlen("(os error ")) : 0;
}

/* Our exit status for the ending the agent reported. */
static int ending_status(const struct exec_args *a, const char *job_id,
			 const struct proto_job_poll *p,
			 const struct follow *fl)
{
	int e;

	if (fl->lost[0] + fl->lost[1] > 0) {
		say("job %s: %" PRIu64 " bytes of stdout and %" PRIu64
		    " of stderr were dropped by the agent before they could "
		    "be read (another client acknowledged them)",
		    job_id, fl->lost[0], fl->lost[1]);
		return CTL_EXEC_LOST;
	}
	if (p->has_bytes && (p->stdout_bytes != fl->wrote[0] ||
			     p->stderr_bytes != fl->wrote[1])) {
		say("job %s: the agent reports %" PRIu64 " bytes of stdout and "
		    "%" PRIu64 " of stderr; %" PRIu64 " and %" PRIu64
		    " arrived",
		    job_id, p->stdout_bytes, p->stderr_bytes, fl->wrote[0],
		    fl->wrote[1]);
		return CTL_EXEC_LOST;
	}
	if (p->truncated) {
		/* Output that is not whole must not pass for a success. */
		if (p->has_exit)
			say("job %s: the agent dropped part of the output (its "
			    "output cap: it has no flow control); the command "
			    "exited %" PRId32,
			    job_id, p->exit_code);
		else
			say("job %s: the agent dropped part of the output (its "
			    "output cap: it has no flow control)",
			    job_id);
		return CTL_EXEC_LOST;
	}
	if (p->has_exit) {
		if (p->exit_code >= 0 && p->exit_code <= 255)
			return p->exit_code;
		say("job %s: the command was killed by a signal (the agent "
		    "does not say which)",
		    job_id);
		return CTL_EXEC_NO_SIGNAL;
	}
	if (!p->has_error || p->err_code == NULL) {
		say("job %s: the agent reported its end without an exit "
		    "status",
		    job_id);
		return CTL_EXEC_LOST;
	}
	if (strcmp(p->err_code, "timeoutExceeded") == 0) {
		say("job %s: timed out after %" PRIu64 " s: %s", job_id,
		    a->timeout_ms / 1000, p->err_message ? p->err_message : "");
		return CTL_EXEC_TIMEOUT;
	}
	if (strcmp(p->err_code, "spawnFailed") == 0) {
		say("cannot run '%s'%s%s: %s", a->argv[0], a->cwd ? " in " : "",
		    a->cwd ? a->cwd : "", p->err_message ? p->err_message : "");
		e = os_error(p->err_message);
		if (e == ENOENT)
			return CTL_EXEC_NOT_FOUND;
		if (e == EACCES || e == ENOEXEC || e == EPERM)
			return CTL_EXEC_CANNOT_RUN;
		return CTL_EXEC_NOT_STARTED;
	}
	if (strcmp(p->err_code, "cancelled") == 0) {
		say("job %s was cancelled by another client", job_id);
		return CTL_EXEC_CANCELLED;
	}
	say("job %s: %s: %s", job_id, p->err_code,
	    p->err_message ? p->err_message : "");
	return CTL_EXEC_LOST;
}

/* ---- following the job -------------------------------------------------------- */

struct job_run {
	struct local_ctl *c;
	const struct exec_args *a;
	struct transport *t;
	struct sigctl *sc;
	char job_id[PROTO_JOB_ID_MAX + 1];
	bool ext; /* the agent holds polls (waitMs) */
	bool flow; /* the job was started with flow control */
};

/* Whether the sandbox's agent process is gone; *why says what we know. */
static bool agent_gone(struct local_ctl *c, const char *name, char *why,
		       size_t size)
{
	struct local_err err = {""};
	struct local_status s;
	bool gone;

	if (local_ctl_status(c, name, &s, &err) < 0) {
		snprintf(why, size, "%s", err.msg);
		return true;
	}
	gone = s.pid <= 0 || !s.alive;
	if (gone) {
		char *log =
			local_state_path(c->state_dir, name, LOCAL_PATH_LOG);

		if (s.pid > 0)
			snprintf(why, size,
				 "its agent (pid %ld) is gone; see %s",
				 (long)s.pid, log);
		else
			snprintf(
				why, size,
				"its agent is gone (the sandbox is %s); see %s",
				proto_record_state_name(s.rec.state)
					? proto_record_state_name(s.rec.state)
					: "?",
				log);
		free(log);
	}
	local_status_cleanup(&s);
	return gone;
}

/* After a failed poll (err): true, said why, when the job's end can no
 * longer be learnt; false to poll again. */
static bool poll_failed(struct job_run *r, const struct sbx_error *err,
			long long last_ok)
{
	const char *name = r->a->name;
	char why[768];

	if (job_not_found(err)) {
		say("job %s: the agent no longer knows it (was the sandbox "
		    "restarted?); its end is not known",
		    r->job_id);
		return true;
	}
	if (agent_gone(r->c, name, why, sizeof(why))) {
		say("job %s: sandbox '%s': %s; the job's end is not known",
		    r->job_id, name, why);
		return true;
	}
	if (!err->retryable || clock_mono_ms() - last_ok >= SILENCE_MS) {
		say("job %s: %s; the job's end is not known", r->job_id,
		    err->reason);
		return true;
	}
	log_debug("job %s: poll failed, retrying: %s", r->job_id, err->reason);
	return false;
}

static int follow_job(struct job_run *r)
{
	const char *name = r->a->name;
	struct proto_job_poll_req req;
	struct follow fl;
	struct proto_job_poll p;
	struct sbx_error err;
	long long started = clock_mono_ms(), last_ok = started, t0;
	long long end_by = started + (long long)r->a->timeout_ms + END_GRACE_MS;
	long interval = POLL_MIN_MS, retry = RETRY_MIN_MS, nap;
	int rc, status;

	memset(&fl, 0, sizeof(fl));
	fl.sc = r->sc;
	for (;;) {
		memset(&req, 0, sizeof(req));
		strlcpy_s(req.job_id, r->job_id, sizeof(req.job_id));
		req.has_since = fl.has_seq;
		req.since_seq = fl.seq;
		req.wait_ms = r->ext ? LONGPOLL_MS : 0;
		req.max_bytes = r->flow ? POLL_MAX_BYTES : 0;
		memset(&p, 0, sizeof(p));
		sbx_error_clear(&err);
		fl.fresh = false;
		t0 = clock_mono_ms();
		rc = ac_job_poll_each(r->t, name, &req, take_frame, &fl, &p,
				      &err);
		if (fl.werr != 0) {
			/* Nobody reads our output any more: the job's
			 * output has nowhere to go, so it stops, as a
			 * pipeline's writer would on SIGPIPE. */
			sig_cancel_now(r->sc);
			if (fl.werr == -EPIPE)
				return 128 + SIGPIPE;
			say("cannot write the job's output: %s; job %s "
			    "cancelled",
			    strerror(-fl.werr), r->job_id);
			return CTL_EXEC_LOST;
		}
		if (rc == 0) {
			last_ok = clock_mono_ms();
			retry = RETRY_MIN_MS;
			if (!p.running) {
				int sig = sig_taken(r->sc);

				status = sig != 0 ? 128 + sig
						  : ending_status(r->a,
								  r->job_id, &p,
								  &fl);
				proto_job_poll_cleanup(&p);
				return status;
			}
			proto_job_poll_cleanup(&p);
			/* Frames may still come after the end (what the
			 * window held): only silence past it counts. */
			if (last_ok > end_by && !fl.fresh) {
				say("job %s: the agent still calls it running "
				    "%lld s after its timeout; giving up on it",
				    r->job_id, END_GRACE_MS / 1000);
				sig_cancel_now(r->sc);
				return CTL_EXEC_LOST;
			}
			if (fl.fresh) {
				interval = POLL_MIN_MS;
				nap = r->ext ? 0 : POLL_MIN_MS;
			} else if (r->ext && last_ok - t0 >= LONGPOLL_MS / 2) {
				nap = 0; /* a long-poll that ran its course */
			} else {
				/* A v1 agent answers at once: back off. */
				nap = interval;
				interval = interval * 2 > POLL_MAX_MS
						   ? POLL_MAX_MS
						   : interval * 2;
			}
			if (nap > 0)
				sleep_ms(nap);
			continue;
		}
		proto_job_poll_cleanup(&p);
		if (poll_failed(r, &err, last_ok))
			return CTL_EXEC_LOST;
		sleep_ms(retry);
		retry = retry * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry * 2;
	}
}

/* ---- starting ----------------------------------------------------------------- */

static int build_req(const struct exec_args *a, bool flow,
		     struct proto_exec_req *req)
{
	const char *why;
	size_t i;

	memset(req, 0, sizeof(*req));
	req->argv = xcalloc(a->argc + 1, sizeof(*req->argv));
	for (i = 0; i < a->argc; i++)
		req->argv[i] = xstrdup(a->argv[i]);
	req->argc = a->argc;
	req->env = xcalloc(a->envc + 1, sizeof(*req->env));
	for (i = 0; i < a->envc; i++)
		req->env[i] = xstrdup(a->env[i]);
	req->envc = a->envc;
	req->cwd = a->cwd ? xstrdup(a->cwd) : NULL;
	req->timeout_ms = a->timeout_ms;
	req->flow = flow;
	why = proto_exec_req_validate(req);
	if (why != NULL) {
		say("exec: %s", why);
		return -EINVAL;
	}
	return 0;
}

/* The record says whether there is an agent to ask at all. */
static int check_record(struct local_ctl *c, const char *name)
{
	struct local_err err = {""};
	struct proto_record rec;
	int rc;

	proto_record_init(&rec);
	rc = local_state_read(c->state_dir, name, &rec, &err);
	if (rc == -ENOENT)
		say("no sandbox '%s' in %s", name, c->state_dir);
	else if (rc < 0)
		say("%s", err.msg);
	else if (proto_record_transport(&rec) == PROTO_RECORD_NATIVE) {
		say("sandbox '%s' is native: it has no agent to run jobs "
		    "(its commands run through a mount's exec file)",
		    name);
		rc = -EPROTO;
	}
	proto_record_cleanup(&rec);
	return rc;
}

int cmd_exec(struct local_ctl *c, int argc, char **argv)
{
	struct local_err lerr = {""};
	struct ctl_session s = {NULL, NULL};
	struct proto_exec_req req;
	struct proto_health h;
	struct exec_args a;
	struct sbx_error err;
	struct job_run r;
	/* Static: the signal thread outlives this function. */
	static struct sigctl sigs_store;
	struct sigctl *sc = &sigs_store;
	int rc, status = CTL_EXEC_NOT_STARTED, sig;
	bool sigs = false;

	memset(&req, 0, sizeof(req));
	memset(&r, 0, sizeof(r));
	rc = parse(argc, argv, &a);
	if (rc != 0) {
		args_cleanup(&a);
		return rc;
	}
	if (check_record(c, a.name) < 0)
		goto out;
	/* Standard input is not ours to read (man/sandboxctl.1): the
	 * command's is /dev/null in the agent. SIGPIPE would kill us with
	 * the job still running; a failed write cancels it instead. */
	signal(SIGPIPE, SIG_IGN);
	rc = sig_start(sc, a.name);
	if (rc < 0) {
		say("cannot watch for signals: %s", strerror(-rc));
		goto out;
	}
	sigs = true;
	/* As the mount resumes (provider_local: local_ctl_start), which
	 * also replaces an agent that died under a Running record. */
	rc = local_ctl_start(c, a.name, &lerr);
	if (rc < 0) {
		say("%s", lerr.msg[0] ? lerr.msg : strerror(-rc));
		goto out;
	}
	sbx_error_clear(&err);
	rc = ctl_session_open(c, RESPONSE_MS, &s, &err);
	if (rc == 0)
		rc = transport_resume(s.t, a.name, &h, &err);
	if (rc < 0) {
		say("sandbox '%s': %s", a.name, err.reason);
		goto out;
	}
	sig = sig_taken(sc);
	if (sig != 0) {
		status = 128 + sig; /* nothing started */
		goto out;
	}
	/* With the job extension the agent keeps every byte for us. */
	r.flow = h.ext_jobs >= 1;
	r.ext = h.ext_jobs >= 1;
	if (build_req(&a, r.flow, &req) < 0)
		goto out;
	rc = ac_job_start(s.t, a.name, &req, r.job_id, &err);
	if (rc < 0) {
		if (err.code == SBX_OUTCOME_UNKNOWN)
			say("sandbox '%s': %s (the command may have started)",
			    a.name, err.reason);
		else
			say("sandbox '%s': %s", a.name, err.reason);
		goto out;
	}
	log_info("sandbox %s: job %s started", a.name, r.job_id);
	sig_job(sc, s.t, r.job_id);
	r.c = c;
	r.a = &a;
	r.t = s.t;
	r.sc = sc;
	status = follow_job(&r);
out:
	if (sigs)
		sig_close(sc);
	if (sigs && status == CTL_EXEC_LOST && sig_taken(sc) != 0) {
		/* Interrupted, and the cancel's fate is not known: the
		 * reason was said; the status is the signal's. */
		status = 128 + sig_taken(sc);
	}
	proto_exec_req_cleanup(&req);
	ctl_session_close(&s);
	args_cleanup(&a);
	return status;
}
