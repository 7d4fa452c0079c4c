## src/ctl
