"""DSB-IFEval scoring (docs/benchmarks/ifeval.md): measurements per case first, verdicts from thresholds second, then
IAS, PAS."""
