/* SPDX-License-Identifier: MIT */
/*
 * provider_azure_settings: the Azure provider's settings as sandboxfs
 * takes them (provider_azure_settings_load in provider_azure.h): -o
 * options, then the azure_config file (key=value lines), then the
 * environment.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "client/azure_auth.h"
#include "client/provider_azure_i.h"

extern char **environ;

#define MAX_CONFIG_BYTES (64UL * 1024)

/* The opt of a setting that is not a -o option. */
#define NO_OPTION ((size_t)-1)

/*
 * The string settings, one row each: the key (azure_config file and -o),
 * the field in the settings, in the -o options (NO_OPTION: not one) and
 * in the provider's config, and the environment variable (NULL: none)
 * (doc/azure.md).
 */
#define SETTING(name, opt, env)                                              \
	{                                                                    \
		"azure_" #name,                                              \
			offsetof(struct provider_azure_settings, name), opt, \
			offsetof(struct provider_azure_config, name), env    \
	}
#define OPTION(name) offsetof(struct provider_opts, azure_##name)
static const struct setting {
	const char *key;
	size_t off;
	size_t opt;
	size_t cfg;
	const char *env;
} settings[] = {
	SETTING(subscription, OPTION(subscription), "AZURE_SUBSCRIPTION_ID"),
	SETTING(resource_group, OPTION(resource_group), "AZURE_RESOURCE_GROUP"),
	SETTING(group, OPTION(group), "SANDBOXFS_AZURE_GROUP"),
	SETTING(region, OPTION(region), "SANDBOXFS_AZURE_REGION"),
	SETTING(endpoint, OPTION(endpoint), NULL),
	SETTING(token_path, OPTION(token_path), NULL),
	SETTING(native_root, NO_OPTION, NULL),
	SETTING(ca_file, OPTION(ca_file), NULL),
	SETTING(resolve, OPTION(resolve), NULL),
};
#undef OPTION
#undef SETTING

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* The string field of setting i in s. */
static char **setting_field(struct provider_azure_settings *s, size_t i)
{
	return (char **)(void *)((char *)s + settings[i].off);
}

void provider_azure_settings_cleanup(struct provider_azure_settings *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < NSETTINGS; i++)
		free(*setting_field(s, i));
	memset(s, 0, sizeof(*s));
	s->record_cache_ms = -1;
}

void provider_azure_settings_config(const struct provider_azure_settings *s,
				    struct provider_azure_config *cfg)
{
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < NSETTINGS; i++)
		*(const char **)(void *)((char *)cfg + settings[i].cfg) =
			*(char *const *)(const void *)((const char *)s +
						       settings[i].off);
	cfg->record_cache_ms = s->record_cache_ms;
}

static void set(char **field, const char *value)
{
	if (value == NULL || *value == '\0')
		return;
	free(*field);
	*field = xstrdup(value);
}

static int cache_seconds(const char *v, long *ms)
{
	char *end = NULL;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno != 0 || end == v || *end != '\0' || !isfinite(d) || d < 0 ||
	    d > 3600)
		return -EINVAL;
	*ms = (long)(d * 1000.0 + 0.5);
	return 0;
}

/* One key of the file or of the options into s. */
static int set_key(struct provider_azure_settings *s, const char *key,
		   const char *value)
{
	size_t i;

	if (strcmp(key, "azure_record_cache") == 0)
		return cache_seconds(value, &s->record_cache_ms);
	for (i = 0; i < NSETTINGS; i++) {
		if (strcmp(key, settings[i].key) == 0) {
			set(setting_field(s, i), value);
			return 0;
		}
	}
	return -ENOENT;
}

/* The settings given as -o options into s. */
static void set_options(struct provider_azure_settings *s,
			const struct provider_opts *o)
{
	size_t i;

	for (i = 0; i < NSETTINGS; i++)
		if (settings[i].opt != NO_OPTION)
			set(setting_field(s, i),
			    *(char *const *)(const void *)((const char *)o +
							   settings[i].opt));
}

static char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && strchr(" \t\r\n", end[-1]) != NULL)
		*--end = '\0';
	return s;
}

static int load_file(const char *path, struct provider_azure_settings *s,
		     struct sbx_error *err)
{
	struct buf b = BUF_INIT(MAX_CONFIG_BYTES);
	char *line, *next, *eq;
	unsigned lineno = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		return sbx_error_fail(err, SBX_INVALID_INPUT, NULL, -rc,
				      "azure: azure_config %s: %s", path,
				      strerror(-rc));
	}
	rc = azure_auth_read_fd(fd, &b);
	if (rc < 0) {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: azure_config %s: %s", path,
			      rc == -EFBIG ? "larger than 64 KiB"
					   : strerror(-rc));
		err->err = EINVAL;
		buf_cleanup(&b);
		return -EINVAL;
	}
	for (line = b.data; line != NULL && rc == 0; line = next) {
		char *key, *value;

		lineno++;
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		key = trim(line);
		if (*key == '\0' || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (eq == NULL) {
			sbx_error_set(err, SBX_INVALID_INPUT, NULL,
				      "azure: %s:%u: not key=value", path,
				      lineno);
			rc = -EINVAL;
			break;
		}
		*eq = '\0';
		key = trim(key);
		value = trim(eq + 1);
		rc = set_key(s, key, value);
		if (rc == -ENOENT)
			sbx_error_set(err, SBX_INVALID_INPUT, NULL,
				      "azure: %s:%u: unknown key '%.64s'", path,
				      lineno, key);
		else if (rc < 0)
			sbx_error_set(err, SBX_INVALID_INPUT, NULL,
				      "azure: %s:%u: %s is not a number of "
				      "seconds (0 to 3600)",
				      path, lineno, key);
	}
	buf_cleanup(&b);
	if (rc < 0) {
		err->err = EINVAL;
		return -EINVAL;
	}
	return 0;
}

static const char *env_value(const char *const *env, const char *name)
{
	size_t n = strlen(name), i;

	if (env == NULL)
		env = (const char *const *)environ;
	for (i = 0; env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

/* " name" appended to the list in missing when absent. */
static void missing_if(char *missing, size_t size, bool absent,
		       const char *name)
{
	size_t n = strlen(missing);

	if (absent)
		snprintf(missing + n, size - n, " %s", name);
}

int provider_azure_settings_load(const struct provider_opts *o,
				 const char *const *env,
				 struct provider_azure_settings *out,
				 struct sbx_error *err)
{
	struct provider_azure_settings s;
	char missing[160] = "";
	size_t i;
	int rc;

	memset(&s, 0, sizeof(s));
	s.record_cache_ms = -1;
	/* Lowest first: the environment, the file, then the options. */
	for (i = 0; i < NSETTINGS; i++)
		if (settings[i].env != NULL)
			set(setting_field(&s, i),
			    env_value(env, settings[i].env));
	if (o != NULL && o->azure_config != NULL) {
		rc = load_file(o->azure_config, &s, err);
		if (rc < 0)
			goto fail;
	}
	if (o != NULL) {
		set_options(&s, o);
		if (o->azure_record_cache != NULL &&
		    cache_seconds(o->azure_record_cache, &s.record_cache_ms) <
			    0) {
			rc = sbx_error_fail(err, SBX_INVALID_INPUT, NULL,
					    EINVAL,
					    "azure: -o azure_record_cache: not "
					    "a number of seconds (0 to 3600)");
			goto fail;
		}
	}
	missing_if(missing, sizeof(missing), s.subscription == NULL,
		   "azure_subscription");
	missing_if(missing, sizeof(missing), s.resource_group == NULL,
		   "azure_resource_group");
	missing_if(missing, sizeof(missing), s.group == NULL, "azure_group");
	missing_if(missing, sizeof(missing),
		   s.region == NULL && s.endpoint == NULL, "azure_region");
	if (missing[0] != '\0') {
		sbx_error_set(err, SBX_INVALID_INPUT, NULL,
			      "azure: missing setting(s):%s (give them with "
			      "-o, in the azure_config file, or as "
			      "AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, "
			      "SANDBOXFS_AZURE_GROUP, SANDBOXFS_AZURE_REGION)",
			      missing);
		err->err = EINVAL;
		rc = -EINVAL;
		goto fail;
	}
	*out = s;
	return 0;
fail:
	provider_azure_settings_cleanup(&s);
	return rc;
}
