## tests: transport
## The transport core against a scriptable stub agent and a counting stub
## provider: the seed's scenarios, then the further transport rules.
check_sandboxfs_SOURCES += \
	%reldir%/stub_agent.c %reldir%/stub_agent.h \
	%reldir%/stub_provider.c %reldir%/stub_provider.h \
	%reldir%/transport_helpers.c %reldir%/transport_helpers.h \
	%reldir%/transport_seed.h %reldir%/check_transport_seed.c \
	%reldir%/check_transport_seed_bodies.c %reldir%/check_transport.c \
	%reldir%/check_transport_deadline.c %reldir%/check_transport_repeat.c \
	%reldir%/check_transport_http.c
