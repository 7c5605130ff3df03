"""Corpus importers: one module per external layout, each reading that layout into M3 events and their windows
(`duplex-eval import ...`), as lhotse keeps one recipe per corpus. What they share (the output folder's import
records, the window cut, writing the config, its summary and its card) is `common.py`.

- `m3_authors.py`: the M3-DuplexBench authors' released layout (`duplex-eval import m3`).
- `fdb_v1.py`: Full-Duplex-Bench v1's per-sample folders (`duplex-eval import fdb`).
"""
