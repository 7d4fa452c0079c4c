## The client layer: errors, the provider interface, its registry and the
## providers, the transport core (its curl engine the only libcurl user)
## and the typed agent client. It sees src/common only.
noinst_LIBRARIES += libsbfs_client.a
libsbfs_client_a_CPPFLAGS = $(AM_CPPFLAGS) $(SEE_CLIENT)
libsbfs_client_a_CFLAGS = $(AM_CFLAGS) $(CURL_CFLAGS) $(CRYPTO_CFLAGS) \
	$(PTHREAD_CFLAGS)
libsbfs_client_a_SOURCES = \
	%reldir%/sbx_error.c %reldir%/sbx_error.h \
	%reldir%/provider.c %reldir%/provider.h \
	%reldir%/provider_local.c %reldir%/provider_local.h \
	%reldir%/transport.c %reldir%/transport.h %reldir%/transport_i.h \
	%reldir%/transport_send.c %reldir%/transport_session.c \
	%reldir%/transport_http.c \
	%reldir%/transport_curl.c %reldir%/transport_curl.h \
	%reldir%/agent_client.c %reldir%/agent_client.h \
	%reldir%/child_output.c %reldir%/child_output.h

## The local provider's state directory and lifecycle (shared by sandboxctl
## and the mount).
libsbfs_client_a_SOURCES += \
	%reldir%/local_state.c %reldir%/local_state.h \
	%reldir%/local_ctl.c %reldir%/local_ctl.h %reldir%/local_ctl_i.h \
	%reldir%/local_copy.c %reldir%/local_spawn.c %reldir%/local_boot.c \
	%reldir%/local_rm.c

## The Azure provider: the data plane (provider_azure) and the Entra ID
## credential chain (azure_auth); the data plane's JSON is common's
## (proto_azure).
libsbfs_client_a_SOURCES += \
	%reldir%/provider_azure.c %reldir%/provider_azure.h \
	%reldir%/provider_azure_i.h %reldir%/provider_azure_dp.c \
	%reldir%/provider_azure_native.c %reldir%/provider_azure_settings.c \
	%reldir%/azure_auth.c %reldir%/azure_auth.h %reldir%/azure_auth_i.h \
	%reldir%/azure_auth_cli.c
