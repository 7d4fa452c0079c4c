## src/agent
