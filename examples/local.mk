## examples
