/* SPDX-License-Identifier: MIT */
/* fs_helpers: see fs_helpers.h. */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "fs/cache.h"
#include "fs/prefetch.h"
#include "tests/fs_helpers.h"

void tf_mount_make(struct tf_mount *m, struct provider *prov,
		   struct transport *t, enum transport_kind kind,
		   double attr_timeout)
{
	struct sbfs *fs = xcalloc(1, sizeof(*fs));
	struct sbx *sb = xcalloc(1, sizeof(*sb));

	fs->o.timeout_s = 30;
	fs->o.attr_timeout = attr_timeout;
	fs->prov = prov;
	fs->t = t;
	fs->uid = getuid();
	fs->gid = getgid();
	pthread_mutex_init(&fs->lock, NULL);
	ck_assert_int_eq(cache_new(attr_timeout, &fs->cache), 0);
	ck_assert_int_eq(prefetch_new(&fs->pf), 0);
	sb->fs = fs;
	snprintf(sb->id, sizeof(sb->id), "demo");
	pthread_mutex_init(&sb->lock, NULL);
	sb->kind = kind;
	m->fs = fs;
	m->sb = sb;
	m->sp = NULL;
}

void tf_mount_agent(struct tf_mount *m, const struct th_agent *a,
		    double attr_timeout)
{
	struct transport_config cfg;
	struct stub_provider *sp = stub_provider_new();
	char url[96];

	snprintf(url, sizeof(url), "%s/", a->base);
	stub_provider_set_route(sp, url);
	stub_provider_set_credential(sp, a->token, 44);
	stub_transport_config(&cfg, 20000, true);
	tf_mount_make(m, stub_provider_base(sp), stub_transport_new(sp, &cfg),
		      TRANSPORT_AGENT, attr_timeout);
	m->sp = sp;
}

void tf_mount_free(struct tf_mount *m)
{
	if (m->sb != NULL) {
		pthread_mutex_destroy(&m->sb->lock);
		free(m->sb);
		m->sb = NULL;
	}
	if (m->fs != NULL) {
		/* The workers use the transport and the cache: they go
		 * first. */
		prefetch_free(m->fs->pf);
		if (m->sp != NULL)
			transport_free(m->fs->t);
		cache_free(m->fs->cache);
		pthread_mutex_destroy(&m->fs->lock);
		free(m->fs);
		m->fs = NULL;
	}
	stub_provider_free(m->sp);
	m->sp = NULL;
}
