/* SPDX-License-Identifier: MIT */
/*
 * create's progress line and its interruption (ctl.h). The signal handler
 * only records the signal: local_ctl_create asks the progress hook between
 * entries and chunks, and removes the partly made sandbox itself when the
 * hook says so.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "ctl/ctl.h"

#define REDRAW_MS 100

static const int watched[3] = {SIGINT, SIGTERM, SIGHUP};
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	if (got_signal == 0)
		got_signal = sig;
}

static void human(char *out, size_t size, uint64_t bytes)
{
	if (bytes < 1024 * 1024)
		snprintf(out, size, "%.1f KiB", (double)bytes / 1024);
	else if (bytes < 1024ULL * 1024 * 1024)
		snprintf(out, size, "%.1f MiB", (double)bytes / (1024 * 1024));
	else
		snprintf(out, size, "%.2f GiB",
			 (double)bytes / (1024.0 * 1024 * 1024));
}

static void draw(struct ctl_create_watch *w, const char *verb,
		 const struct local_copy_progress *p, const char *end)
{
	char size[32];

	human(size, sizeof(size), p->bytes);
	/* "\033[K" clears what a longer line before left. */
	fprintf(stderr, "\r%s: %s %llu files, %s\033[K%s", w->name, verb,
		(unsigned long long)p->files, size, end);
	fflush(stderr);
	w->shown = end[0] == '\0';
}

int ctl_create_watch_progress(void *arg, const struct local_copy_progress *p)
{
	struct ctl_create_watch *w = arg;
	long long now;

	w->last = *p;
	if (got_signal != 0)
		return -EINTR;
	if (!w->tty)
		return 0;
	now = clock_mono_ms();
	if (now >= w->next_ms) {
		w->next_ms = now + REDRAW_MS;
		draw(w, "copying", p, "");
	}
	return 0;
}

void ctl_create_watch_start(struct ctl_create_watch *w, const char *name)
{
	struct sigaction sa;
	size_t i;

	memset(w, 0, sizeof(*w));
	w->name = name;
	w->tty = isatty(STDERR_FILENO) == 1;
	got_signal = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocked wait gives up instead. */
	for (i = 0; i < 3; i++) {
		if (sigaction(watched[i], NULL, &w->old[i]) < 0)
			continue;
		/* An ignored signal (nohup, a background job of a script)
		 * stays ignored. */
		if (w->old[i].sa_handler == SIG_IGN)
			continue;
		w->installed[i] = sigaction(watched[i], &sa, NULL) == 0;
	}
}

int ctl_create_watch_finish(struct ctl_create_watch *w, int rc)
{
	int sig = got_signal;
	size_t i;

	for (i = 0; i < 3; i++)
		if (w->installed[i])
			sigaction(watched[i], &w->old[i], NULL);
	if (w->tty && rc == 0 && w->last.files + w->last.bytes > 0)
		draw(w, "copied", &w->last, "\n");
	else if (w->shown)
		fputs("\r\033[K", stderr);
	w->shown = false;
	if (rc == -EINTR && sig != 0) {
		fprintf(stderr,
			"sandboxctl: %s: interrupted (%s): what it had made "
			"is removed\n",
			w->name, strsignal(sig));
		return 128 + sig;
	}
	return -1;
}
