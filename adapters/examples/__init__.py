"""Worked examples of adapters a user writes for their own model (docs/adding-a-model.md)."""
