## tests/integration
