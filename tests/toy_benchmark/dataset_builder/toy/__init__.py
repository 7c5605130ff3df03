"""The toy benchmark's dataset: two spoken questions, one window each (tests/toy_benchmark/README.md)."""
