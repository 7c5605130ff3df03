"""Duplex-MPE scoring: measurements per window first, verdicts from thresholds second (SPEC §5)."""
