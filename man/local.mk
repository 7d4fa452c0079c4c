## man
dist_man_MANS += %reldir%/sandboxctl.1
