## src
