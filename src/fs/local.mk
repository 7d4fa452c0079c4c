## src/fs
