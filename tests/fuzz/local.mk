## tests/fuzz
