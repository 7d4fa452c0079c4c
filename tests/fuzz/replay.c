/* SPDX-License-Identifier: MIT */
/* The corpus replay of the fuzz targets; see replay.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "tests/fuzz/replay.h"

/* Largest corpus file replayed. */
#define REPLAY_MAX (1024 * 1024)

static int replay_file(const char *prog, const char *path)
{
	struct buf b = BUF_INIT(REPLAY_MAX);
	char chunk[8192];
	size_t n;
	FILE *f = fopen(path, "rb");

	if (f == NULL) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (buf_append(&b, chunk, n) < 0) {
			fprintf(stderr, "%s: %s: too large\n", prog, path);
			fclose(f);
			buf_cleanup(&b);
			return -1;
		}
	}
	fclose(f);
	LLVMFuzzerTestOneInput((const uint8_t *)(b.data ? b.data : ""), b.len);
	buf_cleanup(&b);
	return 0;
}

/* Replay every regular file of dir; the count, or -1. */
static int replay_dir(const char *prog, const char *dir)
{
	struct dirent **names;
	int n, i, count = 0;

	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		char path[4096];

		if (names[i]->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir,
				 names[i]->d_name);
			if (replay_file(prog, path) < 0)
				count = -1;
			else if (count >= 0)
				count++;
		}
		free(names[i]);
	}
	free(names);
	return count;
}

/* The replay of the program prog over the corpus corpus (replay.h). */
static int replay_main(const char *prog, const char *corpus, int argc,
		       char **argv)
{
	const char *src = getenv("SBFS_SRCDIR");
	char dir[4096];
	int i, n, total = 0;

	if (argc < 2) {
		snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s",
			 src != NULL && *src != '\0' ? src : ".", corpus);
		n = replay_dir(prog, dir);
		if (n <= 0)
			return 99;
		printf("%s: %d inputs replayed\n", prog, n);
		return 0;
	}
	for (i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			n = replay_dir(prog, argv[i]);
		else
			n = replay_file(prog, argv[i]) == 0 ? 1 : -1;
		if (n < 0)
			return 1;
		total += n;
	}
	printf("%s: %d inputs replayed\n", prog, total);
	return 0;
}

/* The replay program of the fuzzer whose corpus is fuzz_corpus. */
int main(int argc, char **argv)
{
	char prog[256];

	snprintf(prog, sizeof(prog), "%s-fuzzer", fuzz_corpus);
	return replay_main(prog, fuzz_corpus, argc, argv);
}
