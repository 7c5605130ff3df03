"""The toy benchmark's score: one rate, `answered`, with its Wilson interval (tests/toy_benchmark/README.md)."""
