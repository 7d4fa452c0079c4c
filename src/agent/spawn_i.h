/* SPDX-License-Identifier: MIT */
/*
 * spawn_i: the spawner, shared by spawn.c (how commands run, decided at
 * start-up: bubblewrap's layout, the box, the zygote) and spawn_cmd.c
 * (starting one command). Read-only once agent_spawner_new returned.
 */
#ifndef SBFS_AGENT_SPAWN_I_H
#define SBFS_AGENT_SPAWN_I_H

#ifndef SBFS_SEE_AGENT
#error "src/agent/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/confine.h"
#include "agent/spawn.h"
#include "agent/zygote.h"

struct agent_spawner {
	const struct agent *a;
	char *root; /* canonical session root */
	bool confined;
	const char *bwrap;
	/* bubblewrap's options up to the session root bind, fixed at start */
	char **bwrap_head;
	size_t bwrap_headc;
	struct agent_zygote *zygote; /* NULL: one bubblewrap per command */
	/* How a child enters the sandbox (confine.h): the zygote's, and the
	 * one of a bubblewrap per command, which also sets RLIMIT_NPROC
	 * before bubblewrap (its user namespace is the command's own). */
	struct agent_box box;
	struct agent_box box_each;
	struct agent_cgroup *cg; /* NULL: rlimits only */
	struct agent_net_cfg net;
	char *resolv_dest; /* NULL: the host's resolver configuration */
	/* What a staged namespace keeps: the system's directories, and
	 * those of bubblewrap and of the resolver configuration. */
	const char *keep[16];
	char *keep_bwrap, *keep_resolv;
	uint64_t pids, memory, tmp_size;
	uint64_t data; /* RLIMIT_DATA of each command; 0: the cgroup's */
	char tmp_arg[24]; /* tmp_size in decimal, for bubblewrap */
};

#endif
