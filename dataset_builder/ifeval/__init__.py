"""DSB-IFEval: persona-implied floor control (docs/benchmarks/ifeval.md). The data contract is DESIGN.md and
schema.py."""
