/* SPDX-License-Identifier: MIT */
/*
 * replay: the main() a fuzz target gets when it is built without libFuzzer
 * (FUZZ_REPLAY): it feeds corpus files to LLVMFuzzerTestOneInput, so that
 * the corpus runs as a `make check` test.
 */
#ifndef SBFS_TEST_FUZZ_REPLAY_H
#define SBFS_TEST_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* The target's entry point, defined by each fuzzer. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Replay for the program prog (the prefix of its messages). With no
 * argument, every regular file of tests/fuzz/corpus/<corpus> under
 * $SBFS_SRCDIR (the test harness sets it; "." when unset or empty);
 * otherwise each argument, a file or a directory. Prints the count of
 * inputs replayed. Returns the exit status: 0; 1 when an argument or a
 * file could not be read; 99 (a hard error to the harness) when the
 * corpus could not be read or is empty.
 */
int fuzz_replay_main(const char *prog, const char *corpus, int argc,
		     char **argv);

#endif
