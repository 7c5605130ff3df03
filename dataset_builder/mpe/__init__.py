"""Duplex-MPE script generation: seeded scenes composed from phrase banks, gold answers computed in code."""

from dataset_builder.mpe.generator import (
    check_balance,
    check_name_mentions,
    generate_pair,
    generate_scripts,
    pair_seed,
    position_bucket,
)
from dataset_builder.mpe.preamble import duty_preamble
from dataset_builder.mpe.tasks import FAMILIES

__all__ = [
    "FAMILIES",
    "check_balance",
    "check_name_mentions",
    "duty_preamble",
    "generate_pair",
    "generate_scripts",
    "pair_seed",
    "position_bucket",
]
