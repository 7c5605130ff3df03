"""Duplex-MPE scoring: measurements per window first, verdicts from thresholds second (docs/benchmarks/mpe.md)."""
