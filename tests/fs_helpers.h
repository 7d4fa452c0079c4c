/* SPDX-License-Identifier: MIT */
/*
 * fs_helpers: a mount's state without FUSE, for the suites of src/fs
 * modules that run against a sandbox (files/ without the extension, the
 * prefetched contents): a struct sbfs with its cache and prefetch store,
 * one sandbox "demo", and a transport to an agent the test started.
 * Every failure aborts the test.
 */
#ifndef SBFS_TEST_FS_HELPERS_H
#define SBFS_TEST_FS_HELPERS_H

#include "fs/fs_i.h"
#include "tests/helpers.h"
#include "tests/stub_provider.h"

/* The mount and its sandbox. */
struct tf_mount {
	struct sbfs *fs;
	struct sbx *sb; /* "demo" */
	struct stub_provider *sp; /* with tf_mount_agent */
};

/* A mount of prov's sandboxes through t (may be NULL), its attributes
 * kept attr_timeout seconds, and its sandbox "demo" of transport kind. */
void tf_mount_make(struct tf_mount *m, struct provider *prov,
		   struct transport *t, enum transport_kind kind,
		   double attr_timeout);
/* The same, its sandbox served by agent a (a stub provider routes to it
 * with a's credential). */
void tf_mount_agent(struct tf_mount *m, const struct th_agent *a,
		    double attr_timeout);
/* Free the mount (and the transport and stub provider of
 * tf_mount_agent). */
void tf_mount_free(struct tf_mount *m);

#endif
