"""Worked examples of adapters a user writes for their own model (README "Add your model in one file")."""
