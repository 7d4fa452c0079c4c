## tests/fuzz

## frame-fuzzer: the NDJSON splitter, output frames, job poll bodies and
## command requests. A libFuzzer target with --enable-fuzzing; otherwise
## the same source replays its corpus as a `make check` test, with the
## corpus replay of replay.c that both targets share.
frame_fuzzer_SOURCES = %reldir%/frame-fuzzer.c %reldir%/replay.h
if ENABLE_FUZZING
noinst_PROGRAMS += frame-fuzzer
frame_fuzzer_CPPFLAGS = $(AM_CPPFLAGS)
frame_fuzzer_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_LDFLAGS)
else
check_PROGRAMS += frame-fuzzer
TESTS += frame-fuzzer
frame_fuzzer_CPPFLAGS = $(AM_CPPFLAGS)
frame_fuzzer_SOURCES += %reldir%/replay.c
endif
frame_fuzzer_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS)
frame_fuzzer_LDADD = $(LIB_COMMON) $(CJSON_LIBS) -lm
EXTRA_DIST += %reldir%/frame.dict %reldir%/corpus/frame

## agent-request-fuzzer: what the agent decodes from a request (paths, the
## v1 file bodies, command and job bodies, extension bodies). A libFuzzer
## target with --enable-fuzzing; otherwise it replays its corpus in
## `make check`.
agent_request_fuzzer_SOURCES = %reldir%/agent-request-fuzzer.c \
	%reldir%/replay.h
if ENABLE_FUZZING
noinst_PROGRAMS += agent-request-fuzzer
agent_request_fuzzer_CPPFLAGS = $(AM_CPPFLAGS)
agent_request_fuzzer_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_LDFLAGS)
else
check_PROGRAMS += agent-request-fuzzer
TESTS += agent-request-fuzzer
agent_request_fuzzer_CPPFLAGS = $(AM_CPPFLAGS)
agent_request_fuzzer_SOURCES += %reldir%/replay.c
endif
agent_request_fuzzer_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS)
agent_request_fuzzer_LDADD = $(LIB_COMMON) $(CJSON_LIBS) -lm
EXTRA_DIST += %reldir%/agent-request.dict %reldir%/corpus/agent-request
