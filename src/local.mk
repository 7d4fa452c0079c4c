## The client core: errors, the provider interface and providers, the
## transport core (the only libcurl user) and the typed agent client.
libsandboxfs_a_SOURCES += \
	%reldir%/sbx_error.c %reldir%/sbx_error.h \
	%reldir%/provider.c %reldir%/provider.h \
	%reldir%/provider_local.c %reldir%/provider_local.h \
	%reldir%/transport.c %reldir%/transport.h \
	%reldir%/agent_client.c %reldir%/agent_client.h

## The local provider's state directory and lifecycle (shared by sandboxctl
## and the mount).
libsandboxfs_a_SOURCES += \
	%reldir%/local_state.c %reldir%/local_state.h \
	%reldir%/local_ctl.c %reldir%/local_ctl.h

## The Azure provider: the data plane (provider_azure), the Entra ID
## credential chain (azure_auth) and the data plane's JSON (proto_azure).
libsandboxfs_a_SOURCES += \
	%reldir%/provider_azure.c %reldir%/provider_azure.h \
	%reldir%/azure_auth.c %reldir%/azure_auth.h \
	%reldir%/common/proto_azure.c %reldir%/common/proto_azure.h
