## tests: agent
check_sandboxfs_SOURCES += %reldir%/check_proto_ext.c %reldir%/check_proto_ext_ops.c \
	%reldir%/proto_ext_helpers.c %reldir%/proto_ext_helpers.h \
	%reldir%/check_agent_ext.c
check_sandboxfs_SOURCES += %reldir%/check_agent_ext_tree.c %reldir%/check_agent_ext_io.c
check_sandboxfs_SOURCES += %reldir%/check_agent.c %reldir%/check_agent_replies.c
check_sandboxfs_SOURCES += %reldir%/check_agent_http.c
check_sandboxfs_SOURCES += %reldir%/check_proto_files.c
check_sandboxfs_SOURCES += %reldir%/check_agent_events.c \
	%reldir%/check_agent_events_decode.c
check_sandboxfs_SOURCES += %reldir%/check_agent_units.c
check_sandboxfs_SOURCES += %reldir%/agent_helpers.c %reldir%/agent_helpers.h
