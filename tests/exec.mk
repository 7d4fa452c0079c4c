## tests: exec
