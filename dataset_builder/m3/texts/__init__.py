"""The M3 text banks (data files; see README.md). `python -m dataset_builder.m3.texts check` validates them."""
