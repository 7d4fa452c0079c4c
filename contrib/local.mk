## contrib: what a system uses around the programs: a systemd user unit
## that mounts your sandboxes at login, and bash completion for sandboxctl
## and sandboxfs.
systemduserunitdir = $(prefix)/lib/systemd/user
systemduserunit_DATA = %reldir%/sandboxfs.service
CLEANFILES += %reldir%/sandboxfs.service
EXTRA_DIST += %reldir%/sandboxfs.service.in
%reldir%/sandboxfs.service: %reldir%/sandboxfs.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) %reldir% && \
	sed -e 's|@bindir[@]|$(bindir)|g' $(srcdir)/%reldir%/sandboxfs.service.in >$@

bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = %reldir%/sandboxctl %reldir%/sandboxfs
## make install installs everything where the documents say, and the
## completions complete.
TESTS += tests/check_install.sh
EXTRA_DIST += tests/check_install.sh
