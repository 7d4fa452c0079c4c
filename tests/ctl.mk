## tests: ctl
