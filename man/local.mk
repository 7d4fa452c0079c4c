## man
dist_man_MANS += %reldir%/sandboxctl.1
dist_man_MANS += %reldir%/sandbox-agent.8
