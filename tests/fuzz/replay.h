/* SPDX-License-Identifier: MIT */
/*
 * replay: the main() a fuzz target gets when it is built without libFuzzer
 * (in replay.c): it feeds corpus files to LLVMFuzzerTestOneInput, so that
 * the corpus runs as a `make check` test; and FAIL, which both targets
 * stop with.
 */
#ifndef SBFS_TEST_FUZZ_REPLAY_H
#define SBFS_TEST_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The target's entry point, defined by each fuzzer. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The target's corpus, defined by each fuzzer: tests/fuzz/corpus/<corpus>,
 * replayed by the program <corpus>-fuzzer (the prefix of its messages).
 *
 * The replay's main(), in replay.c: with no argument, every regular file
 * of that corpus under $SBFS_SRCDIR (the test harness sets it; "." when
 * unset or empty); otherwise each argument, a file or a directory. Prints
 * the count of inputs replayed. The exit status: 0; 1 when an argument or
 * a file could not be read; 99 (a hard error to the harness) when the
 * corpus could not be read or is empty.
 */
extern const char fuzz_corpus[];

/* Stop the target on a broken property: the program, what broke and the
 * line, then abort() (the crash libFuzzer records). */
#define FAIL(what)                                                        \
	do {                                                              \
		fprintf(stderr, "%s-fuzzer: %s (line %d)\n", fuzz_corpus, \
			what, __LINE__);                                  \
		abort();                                                  \
	} while (0)

#endif
