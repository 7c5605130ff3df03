"""DSB-IFEval: persona-implied floor control (SPEC §7). The data contract is DESIGN.md and schema.py."""
