/* SPDX-License-Identifier: MIT */
/* sigdefault: see sigdefault.h. */
#include "config.h"

#include <signal.h>
#include <string.h>

#include "common/sigdefault.h"

void sig_defaults(void)
{
	struct sigaction sa;
	sigset_t none;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}
