## doc: the wire protocols, the internals and the user documents, all
## installed under the documentation directory ($(docdir)), with
## SEMANTICS.md and README.md at its top.
dist_doc_DATA += README.md SEMANTICS.md
protodocdir = $(docdir)/doc
dist_protodoc_DATA = \
	%reldir%/protocol-v1.md \
	%reldir%/commands.md \
	%reldir%/security.md \
	%reldir%/azure.md \
	%reldir%/protocol-ext.md \
	%reldir%/transport-rules.md
internalsdocdir = $(docdir)/doc/internals
dist_internalsdoc_DATA = \
	%reldir%/internals/architecture.md \
	%reldir%/internals/transport.md \
	%reldir%/internals/cache.md
