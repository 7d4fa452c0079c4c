## examples
## Scripts that use a mount (each has a t-example-*.sh test), installed as
## documentation.
exampledir = $(docdir)/examples
dist_example_SCRIPTS = \
	%reldir%/sandbox-backup \
	%reldir%/sandbox-sync \
	%reldir%/grep-all-sandboxes
