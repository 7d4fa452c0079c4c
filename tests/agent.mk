## tests: agent
