/* SPDX-License-Identifier: MIT */
/*
 * provider: the interface every sandbox provider implements (doc/internals/
 * transport.md, "Providers").
 * A provider answers metadata questions about the sandboxes it knows (their
 * records, the agent's route, the per-boot credential) and performs
 * lifecycle requests (resume, stop); the transport core (transport.h)
 * decides everything else. A provider knows nothing about the agent
 * protocol.
 *
 * Every operation returns 0 or a negative errno and, on failure, fills the
 * sbx_error it is given (never with a credential). -ENOENT means the
 * sandbox (or, for credential(), the credential) does not exist.
 *
 * Providers must be thread-safe: the FUSE layer calls them from many
 * threads.
 */
#ifndef SBFS_PROVIDER_H
#define SBFS_PROVIDER_H

#ifndef SBFS_SEE_CLIENT
#error "src/client/ is not seen from this layer (doc/internals/architecture.md)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/statvfs.h>

#include "common/buf.h"
#include "common/proto_record.h"
#include "client/sbx_error.h"

#define PROVIDER_ID_MAX 63

enum provider_state {
	PROVIDER_STATE_UNKNOWN = 0,
	PROVIDER_STATE_CREATING,
	PROVIDER_STATE_RUNNING,
	PROVIDER_STATE_STOPPING,
	PROVIDER_STATE_STOPPED,
	PROVIDER_STATE_SUSPENDED,
	PROVIDER_STATE_RESUMING,
	PROVIDER_STATE_DELETING,
};

/* "Running" ...; "Unknown" for PROVIDER_STATE_UNKNOWN. */
const char *provider_state_name(enum provider_state s);

/* What the transport core needs from a provider record. */
struct provider_record {
	char id[PROVIDER_ID_MAX + 1];
	enum provider_state state;
	struct proto_label *labels; /* the record's labels (common) */
	size_t nlabels;
	char *route_hint; /* informational (e.g. the recorded agentUrl) */
};

void provider_record_cleanup(struct provider_record *r);
/* The value of a label, or NULL. */
const char *provider_record_label(const struct provider_record *r,
				  const char *key);

/* Result of a native (legacy) exec: buffered output, as the data plane's
 * executeShellCommand answers. */
struct provider_exec_result {
	struct buf out;
	struct buf err;
	bool has_exit;
	int exit_code;
};

void provider_exec_result_cleanup(struct provider_exec_result *r);

struct provider;

struct provider_ops {
	const char *name;

	/* The ids of the sandboxes this provider lists (heap array of heap
	 * strings). */
	int (*list)(struct provider *p, char ***ids, size_t *n,
		    struct sbx_error *err);
	/* Read a record; -ENOENT when the sandbox is gone. Always the
	 * provider's current answer: the transport reads one before every
	 * operation that depends on it (doc/transport-rules.md 1). */
	int (*record)(struct provider *p, const char *id,
		      struct provider_record *out, struct sbx_error *err);
	/* A record only to show a sandbox in a listing (its directory's
	 * existence and attributes), which may come from what the
	 * provider's last list or read returned a short while ago. Never
	 * used for a decision about the transport or the sandbox's state.
	 * Optional: NULL means record(). */
	int (*record_listed)(struct provider *p, const char *id,
			     struct provider_record *out,
			     struct sbx_error *err);
	/* The agent's route (heap URL string), unvalidated: the core checks
	 * it with route_allowed. */
	int (*route)(struct provider *p, const char *id, char **url,
		     struct sbx_error *err);
	/* The route policy: true when url is a route this provider may hand
	 * out (scheme, host, path "/", no user, query or fragment). */
	bool (*route_allowed)(struct provider *p, const char *url);
	/* The user a listener must run as (or root) for the core to send a
	 * request on a connection to it: checked on each new connection to
	 * an http+unix:// route (the socket's owner before connecting, the
	 * peer's credentials after) and to a loopback TCP route (the
	 * accepting socket's owner), before the credential goes out
	 * (doc/transport-rules.md 2). Optional: NULL checks nothing (routes
	 * to other hosts). */
	int (*listener_uid)(struct provider *p, uid_t *uid);
	/* The per-boot credential's raw bytes (heap; the caller wipes and
	 * frees them). -ENOENT when it is not there yet. */
	int (*credential)(struct provider *p, const char *id, char **bytes,
			  size_t *len, struct sbx_error *err);
	/* Judge a record before activating a new boot (egress and network
	 * policy). Optional: NULL accepts every record. */
	int (*judge)(struct provider *p, const struct provider_record *rec,
		     struct sbx_error *err);
	/* Ask for a stopped sandbox to run again, or to stop. They may return
	 * before the state changes: the core polls record(). */
	int (*resume)(struct provider *p, const char *id,
		      struct sbx_error *err);
	int (*stop)(struct provider *p, const char *id, struct sbx_error *err);

	/* Native (legacy) sessions, optional (NULL when the provider has
	 * none). native_read appends the file's bytes to out (whose max
	 * bounds them); native_exec runs a shell command line. */
	int (*native_read)(struct provider *p, const char *id, const char *path,
			   struct buf *out, struct sbx_error *err);
	int (*native_exec)(struct provider *p, const char *id,
			   const char *command, const char *cwd,
			   struct provider_exec_result *out,
			   struct sbx_error *err);

	/* Transport options this provider's routes need (extra trusted CA
	 * file, pinned name resolution "host:port:addr" entries), or NULL. */
	const char *(*ca_file)(struct provider *p);
	const char *const *(*resolve)(struct provider *p);

	/* What the mount shows as its source in mount(8) and df, into buf:
	 * the provider and the sandboxes' home ("local:/var/lib/sandboxfs").
	 * Optional: NULL shows the provider's name. */
	void (*home)(struct provider *p, char *buf, size_t size);
	/* The file system the sandboxes live on, for df at the top of the
	 * mount. Optional: NULL shows an empty one. */
	int (*statfs)(struct provider *p, struct statvfs *st);

	void (*free)(struct provider *p);
};

struct provider {
	const struct provider_ops *ops;
	void *priv;
};

/* Free a provider through its ops; NULL-safe. */
void provider_free(struct provider *p);

/*
 * What opens a provider: the strings as the user gave them (sandboxfs's
 * -o options), NULL when not given. Borrowed by provider_open.
 */
struct provider_opts {
	char *name; /* "local" (the default) or "azure" */
	char *state_dir; /* local: the state directory */
	/* azure (sandboxfs(1), doc/azure.md) */
	char *azure_subscription;
	char *azure_resource_group;
	char *azure_group;
	char *azure_region;
	char *azure_endpoint; /* override of the data-plane base URL */
	char *azure_token_path; /* the agent's credential file */
	char *azure_config; /* a config file with the above */
	char *azure_ca_file; /* extra trusted CA (tests) */
	char *azure_resolve; /* host:port:addr pins, comma separated */
	char *azure_record_cache; /* seconds a record is reused in
					listings (2) */
	long connect_timeout_ms; /* a provider's connections; 0: its own */
};

/* Free the strings of o (not o). */
void provider_opts_cleanup(struct provider_opts *o);

/*
 * The registry: open the provider o names. An unknown name, or a provider
 * this build has not, is SBX_INVALID_INPUT (-EINVAL) naming the known
 * ones; the provider's own errors as it says them.
 */
int provider_open(const struct provider_opts *o, struct provider **out,
		  struct sbx_error *err) __attribute__((warn_unused_result));

#endif
