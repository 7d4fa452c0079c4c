## tests: transport
