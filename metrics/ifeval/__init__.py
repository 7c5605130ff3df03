"""DSB-IFEval scoring (SPEC §7): measurements per case first, verdicts from thresholds second, then IAS, PAS."""
