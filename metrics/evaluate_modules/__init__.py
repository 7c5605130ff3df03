"""The `evaluate` modules: one folder per Hugging Face metric script over a run's stored measurements
(`<name>/<name>.py`, its card `<name>/README.md`), loaded with `evaluate.load(metrics.metric_dir(name))` and pushed
with `duplex-eval push-metric`. What every script shares is `base.py`. The benchmarks' scorers these scripts call
are metrics/mpe/, metrics/m3/ and metrics/ifeval/.
"""
