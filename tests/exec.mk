## tests: exec
## The exec and job bodies, and the agent's command routes over the wire.
check_sandboxfs_SOURCES += %reldir%/check_proto_exec.c \
	%reldir%/check_proto_jobs.c %reldir%/proto_exec_helpers.c \
	%reldir%/proto_exec_helpers.h \
	%reldir%/check_agent_exec.c %reldir%/check_agent_zygote.c \
	%reldir%/check_agent_jobs.c
