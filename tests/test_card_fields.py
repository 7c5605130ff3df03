"""Every dataset card's Fields table names every column its configs have, and no column they lack: compared with
the features the builders write each row against (`write_config` checks every row with them). The cards of
imported M3 data describe the same rows as the built M3 card, and say so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dataset_builder.hf_dataset import MPE_FEATURES
from dataset_builder.ifeval.rows import ifeval_features
from dataset_builder.m3.rows import m3_features

CARDS = Path(__file__).resolve().parent.parent / "cards"
FEATURES = {"mpe.md": MPE_FEATURES, "m3.md": m3_features(), "ifeval.md": ifeval_features()}


def fields_table(card: str) -> list[str]:
    """The column names of a card's `## Fields` table (a row may name several: `a`, `b`)."""
    text = (CARDS / card).read_text()
    section = text.split("\n## Fields\n", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in section.splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([^`]+)`", line.split("|")[1])
    return names


@pytest.mark.parametrize("card", sorted(FEATURES))
def test_the_fields_table_has_every_column_and_no_other(card: str) -> None:
    features = FEATURES[card]
    named = fields_table(card)
    top = [n for n in named if "." not in n]
    assert sorted(set(top)) == sorted(features), (sorted(set(features) - set(top)), sorted(set(top) - set(features)))
    assert len(top) == len(set(top)), "a column is described twice"
    for dotted in (n for n in named if "." in n):  # `turns.label`: a field of a list of structs
        column, field = dotted.split(".", 1)
        assert field in features[column].feature, dotted
    subfields = {n.split(".", 1)[0] for n in named if "." in n}
    for column in subfields:  # a column whose fields are listed lists all of them
        assert {n.split(".", 1)[1] for n in named if n.startswith(column + ".")} == set(features[column].feature)


def test_the_m3_card_lists_transcribed() -> None:
    assert "transcribed" in fields_table("m3.md")


@pytest.mark.parametrize("card", ["m3_import.md", "fdb_import.md"])
def test_imported_m3_cards_point_at_the_m3_fields(card: str) -> None:
    assert "`cards/m3.md`" in (CARDS / card).read_text()


def test_every_card_template_is_covered() -> None:
    assert {p.name for p in CARDS.glob("*.md")} - {"README.md"} == {*FEATURES, "m3_import.md", "fdb_import.md"}
