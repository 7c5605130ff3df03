"""The task domain's fact tables (dataset_builder/m3/fact_tables.py, texts/facts/*.jsonl) and what the task
dialogues make of them: the tables validate (schema, unique ids and names, aliases no wrong answer contains),
known facts read back exactly, the computed facts (next element, what a capital is the capital of) are right,
follow-ups about the previous answer ask about the entity that answer named, and the full preset passes the
diagnostics' task targets (task_audit.py)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from dataset_builder.m3.bankio import TEXTS_DIR, Problems
from dataset_builder.m3.dialogues import PRESETS, Dialogue, generate_dialogues, gold_key
from dataset_builder.m3.fact_tables import FACTS_DIR
from dataset_builder.m3.knowledge import MAX_DIALOGUES_PER_GOLD, load_knowledge, said
from dataset_builder.m3.task_audit import PAPER_SHIFT_MEAN_S, TaskTargets, qa_stats, task_audit
from dataset_builder.m3.textbank import load_bank
from dataset_builder.mpe.answers import unsafe_aliases

LANGS = ("en", "ja")


@pytest.fixture(scope="module")
def full() -> dict[str, list[Dialogue]]:
    return {lang: generate_dialogues(lang, "task", PRESETS["full"]) for lang in LANGS}


def _rows() -> list[dict]:
    return [json.loads(line) for path in sorted(FACTS_DIR.glob("*.jsonl")) if path.name != "relations.jsonl"
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_tables_validate_with_unique_ids_and_names() -> None:
    problems = Problems()
    kb = load_knowledge(problems)
    assert not problems.errors, problems.errors[:5]
    rows = _rows()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 700
    assert len({e.id for e in kb.entities}) == len(kb.entities)
    for lang in LANGS:
        names = [e.name[lang].lower() for e in kb.entities]
        assert len(names) == len(set(names)), Counter(names).most_common(2)
    kinds = {json.loads(line)["relation"]: json.loads(line)["kind"]
             for line in (FACTS_DIR / "relations.jsonl").read_text().splitlines()}
    for r in rows:  # every value is a kind's value or a reference to another row
        for relation, value in r["facts"].items():
            if isinstance(value, str):
                assert value.startswith("@") and value[1:] in ids and kinds[relation] == "text", (r["id"], value)
            elif isinstance(value, int):
                assert kinds[relation] in ("year", "count"), (r["id"], relation)
            else:
                assert set(value) <= {"en", "ja", "aka"} and kinds[relation] == "text", (r["id"], relation)


def test_known_facts_and_their_golds() -> None:
    kb = load_bank(("en",)).knowledge
    austen = kb.entity("jane_austen")
    assert (austen.facts["born"].value, austen.facts["died"].value, austen.pronoun) == (1775, 1817, "she")
    assert kb.gold(austen, "born", "en") == ("1775", ["seventeen seventy-five"])
    assert kb.gold(austen, "birthplace", "ja") == ("スティーブントン", [])
    # "@jane_austen": the work's author is her name, with her other names as aliases
    assert kb.gold(kb.entity("emma_novel"), "author", "en") == ("Jane Austen", ["Austen"])
    assert kb.link(kb.entity("emma_novel").facts["author"]) == austen
    # a hand-written book of knowledge.yaml links to the same person by name
    assert kb.link(kb.entity("jane_eyre").facts["author"]) == kb.entity("charlotte_bronte")
    iron = kb.entity("element_iron")
    assert kb.gold(iron, "atomic_number", "en") == ("26", ["twenty-six"])
    assert kb.gold(iron, "atomic_number", "ja") == ("26", [])
    assert said(iron.facts["atomic_number"], "ja") == "26"
    assert kb.gold(kb.entity("united_kingdom"), "capital", "ja") == ("ロンドン", [])
    assert kb.gold(kb.entity("ukraine"), "capital", "en") == ("Kyiv", ["Kiev"])


def test_computed_facts() -> None:
    kb = load_bank(("en",)).knowledge
    # the element after each element, by atomic number; none after the last, none across a gap (lead, 82)
    assert kb.gold(kb.entity("element_iron"), "next_element", "en")[0] == "cobalt"
    assert kb.gold(kb.entity("element_hydrogen"), "next_element", "ja")[0] == "ヘリウム"
    assert "next_element" not in kb.entity("element_thallium").facts
    assert "next_element" not in kb.entity("element_curium").facts
    # a capital knows what it is the capital of, and the country's continent
    nairobi = kb.entity("capital_nairobi")
    assert kb.gold(nairobi, "capital_of", "en")[0] == "Kenya"
    assert kb.gold(nairobi, "on_continent", "ja")[0] == "アフリカ"
    assert kb.gold(kb.entity("capital_sacramento"), "state_of", "en")[0] == "California"
    assert kb.gold(kb.entity("capital_matsuyama"), "prefecture_of", "ja")[0] == "愛媛県"
    # a city knowledge.yaml already has learns it: Paris is France's capital, not a second entity
    assert kb.gold(kb.entity("paris"), "capital_of", "en")[0] == "France"
    assert not any(e.id == "capital_paris" for e in kb.entities)
    assert kb.link(kb.entity("united_states").facts["capital"]).id == "capital_washington_d_c"


@pytest.mark.parametrize("lang", LANGS)
def test_aliases_of_table_facts_are_safe(lang: str) -> None:
    kb = load_bank((lang,)).knowledge
    for e in kb.entities:
        if not e.where.startswith("facts/"):
            continue
        for relation, fact in e.facts.items():
            g, aliases = kb.gold(e, relation, lang)
            assert g and g.lower() not in [a.lower() for a in aliases]
            if fact.kind == "text" and lang == "en":
                assert not unsafe_aliases(aliases, kb.others(relation, fact, lang)), (e.id, relation, aliases)


def _broken_bank(tmp_path: Path, table: str) -> Problems:
    root = tmp_path / "texts"
    shutil.copytree(TEXTS_DIR / "facts", root / "facts")
    shutil.copy(TEXTS_DIR / "knowledge.yaml", root / "knowledge.yaml")
    with (root / "facts" / "works.jsonl").open("a", encoding="utf-8") as f:
        f.write(table + "\n")
    problems = Problems()
    load_knowledge(problems, root / "knowledge.yaml", root / "facts")
    return problems


@pytest.mark.parametrize("row, rule", [
    ('{"id": "jaws", "group": "film", "name": {"en": "Jaws 2", "ja": "ジョーズ2"}, "facts": {"released": 1978}}',
     "duplicate entity id"),
    ('{"id": "x_film", "group": "film", "name": {"en": "Jaws", "ja": "X"}, "facts": {"released": 1978}}',
     "duplicate en name"),
    ('{"id": "y_film", "group": "film", "name": {"en": "Y", "ja": "Y"}, "facts": {"director": "@nobody"}}',
     "no entity 'nobody'"),
    ('{"id": "z_film", "group": "film", "name": {"en": "Z", "ja": "Z"}, "facts": {"budget": 5}}',
     "has no kind"),
    ('{"id": "w_film", "group": "film", "name": {"en": "W", "ja": "W"}, "facts": {"released": "1978"}}',
     "fact kind wrong"),
    ('{"id": "v_film", "group": "film", "name": {"en": "V", "ja": "V"}, "facts": {"released": 1978}, "x": 1}',
     "row keys"),
    ('{"id": "u_film", "group": "film", "name": {"en": "U"}, "facts": {"released": 1978}}', "name needs"),
])
def test_a_bad_row_is_one_clear_error(tmp_path: Path, row: str, rule: str) -> None:
    errors = _broken_bank(tmp_path, row).errors
    assert len(errors) == 1 and rule in errors[0].rule, errors
    assert "works.jsonl:176: " in errors[0].where, errors[0].where  # the file and the line


@pytest.mark.parametrize("lang", LANGS)
def test_follow_ups_about_the_previous_answer(full: dict, lang: str) -> None:
    kb = load_bank((lang,)).knowledge
    n = 0
    for d in full[lang]:
        answers = [u for u in d.utterances if u.gold_answer]
        for prev, u in zip(answers, answers[1:], strict=False):
            if u.follows_answer:  # the question is about the entity the previous answer named
                n += 1
                assert kb.link(kb.entity(prev.topic).facts[prev.fact]) == kb.entity(u.topic)
                assert u.context_dependent and u.topic != prev.topic
    assert n >= 0.05 * qa_stats(full[lang])["qa_pairs"]


@pytest.mark.parametrize("lang", LANGS)
def test_full_preset_passes_the_task_targets(full: dict, lang: str, tmp_path: Path) -> None:
    block = task_audit(full[lang], tmp_path, f"m3_task_{lang}", lang)
    assert block["ok"] and all(block["checks"].values()), block
    qa = block["qa"]
    assert qa["distinct_golds"] >= 1000 and qa["distinct_facts"] >= 1000
    assert qa["max_dialogues_per_gold"] == MAX_DIALOGUES_PER_GOLD == 8
    assert block["shift"]["mean_s"] == PAPER_SHIFT_MEAN_S[f"{lang}_task"]  # scripts only: the shipped stats
    per_gold: Counter[str] = Counter()
    for d in full[lang]:
        per_gold.update({gold_key(u.gold_answer) for u in d.utterances if u.gold_answer})
    assert max(per_gold.values()) <= 8 and len(per_gold) == qa["distinct_golds"]


def test_targets_fail_and_are_not_judged_on_few_dialogues(full: dict, tmp_path: Path) -> None:
    few = task_audit(full["en"][:20], tmp_path, "m3_task_en", "en")
    assert few["checks"]["distinct_golds"] is None and few["checks"]["follow_up_share"] is None
    assert few["checks"]["shift_mean"] is None
    assert few["checks"]["max_dialogues_per_gold"] is True and few["ok"]
    strict = task_audit(full["en"], tmp_path, "m3_task_en", "en",
                        TaskTargets(min_distinct_golds=5000, max_dialogues_per_gold=7, shift_tolerance_s=0.0))
    assert strict["checks"]["distinct_golds"] is False and strict["checks"]["max_dialogues_per_gold"] is False
    assert strict["checks"]["shift_mean"] is True and not strict["ok"]  # 0.45 s exactly
