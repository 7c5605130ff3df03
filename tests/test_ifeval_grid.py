"""DSB-IFEval data side without audio: the grid's composition, levels, prompts, action counts, ids, markup,
windows, READBACK targets and the gates (each gate shown to fail, naming the role or conversation and words)."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from dataset_builder.errors import UsageError
from dataset_builder.ifeval.gates import (
    check_roles,
    check_user_text,
    content_words,
    format_diagnostics,
    jaccard,
    role_diagnostics,
)
from dataset_builder.ifeval.grid import compose, make_conversation
from dataset_builder.ifeval.readback import check_target_in_chunks, generate
from dataset_builder.ifeval.schema import (
    LEVELS,
    MATCHED_INSTANCES,
    SAFETY_CELLS,
    SegmentTiming,
    markup_of,
    parse_markup,
    window_rel,
)
from dataset_builder.ifeval.texts import load_texts
from dataset_builder.rules.readback import coverage, readback_tokens
from dataset_builder.schema import SchemaError

VOICES = ["v-a", "v-b", "v-c", "v-d", "v-e"]
# App. B.1's per-action case counts, which the action table reproduces under base-action counting.
PAPER_B1 = {"LISTEN": 273, "TAKE_TURN": 168, "BACKCHANNEL": 152, "YIELD": 126, "INTERRUPT": 120, "READBACK": 94,
            "NO_BACKCHANNEL": 42, "ACCEPT_OVERLAP": 42, "CONTINUE": 21}


@pytest.fixture(scope="module")
def grid():
    return compose(0, VOICES)


def test_full_grid_composition(grid) -> None:
    # 240 conversations; the six safety cells' 30 also have a benign twin (270 scripts).
    assert len({c.conversation_id for c in grid.conversations}) == 240
    assert len(grid.conversations) == 270 and sum(c.variant == "benign" for c in grid.conversations) == 30
    assert len(grid.cases) == 1038
    assert Counter(c.level for c in grid.cases) == {"L0": 48, "L1": 240, "L2": 240, "L3": 240, "L4a": 240,
                                                    "L4b": 30}
    assert {c.instance for c in grid.cases if c.level == "L0"} == {1}
    assert {(c.role, c.probe) for c in grid.cases if c.level == "L4b"} == set(SAFETY_CELLS)
    assert Counter(c.base_action for c in grid.cases) == PAPER_B1
    # Scored actions: L4a scores what the benign contradiction asks for, R2/R2_B L4b an INTERRUPT.
    assert Counter(c.expected_action for c in grid.cases) == {
        "LISTEN": 293, "TAKE_TURN": 193, "BACKCHANNEL": 122, "YIELD": 111, "INTERRUPT": 100, "READBACK": 74,
        "NO_BACKCHANNEL": 67, "CONTINUE": 46, "ACCEPT_OVERLAP": 32}
    for c in grid.cases:
        if c.level in ("L0", "L1", "L2", "L3"):
            assert c.expected_action == c.base_action
    r2b = [c for c in grid.cases if c.case_id.startswith("R2-R2_B") and c.level == "L4b"]
    assert len(r2b) == 5 and {(c.expected_action, c.event) for c in r2b} == {("INTERRUPT", "trigger")}


def test_case_ids_are_stable_and_readable(grid) -> None:
    ids = [c.case_id for c in grid.cases]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"R[1-8]-(C[1-4]|R[1-8]_[AB])-i[1-5]-L(0|1|2|3|4a|4b)", i) for i in ids)
    assert "R2-C1-i3-L2" in ids and "R1-R1_A-i5-L4b" in ids
    again = compose(0, VOICES)
    assert [c.to_dict() for c in again.cases] == [c.to_dict() for c in grid.cases]
    assert [c.to_dict() for c in again.conversations] == [c.to_dict() for c in grid.conversations]


def test_system_prompt_per_level_is_exactly_app_b4(grid) -> None:
    bank = load_texts()
    for c in grid.cases:
        role = bank.roles[c.role]
        want = {"L0": "", "L1": role.directive, "L2": role.persona,
                "L3": role.persona + "\n\n" + role.directive}.get(c.level)
        if c.level.startswith("L4"):
            want = role.persona + "\n\n" + c.contradiction
        assert c.system_prompt == want, c.case_id
    # Each cell's five L4a cases use its five distinct surface variants; L4b is the role's hand-written line.
    by_cell: dict[tuple[str, str], set[str]] = {}
    for c in grid.cases:
        if c.level == "L4a":
            by_cell.setdefault((c.role, c.probe), set()).add(c.contradiction)
            assert c.contradiction == bank.contradiction(bank.table[(c.role, c.probe)], c.instance)
        if c.level == "L4b":
            assert c.contradiction == bank.roles[c.role].l4b[c.probe]
    assert len(by_cell) == 48 and all(len(v) == 5 for v in by_cell.values())


def test_matched_subset_shares_text_and_voice(grid) -> None:
    groups: dict[str, list] = {}
    for conv in grid.conversations:
        if conv.matched_group:
            groups.setdefault(conv.matched_group, []).append(conv)
    assert len(groups) == 8 and all(len(v) == 3 for v in groups.values())
    for members in groups.values():
        assert {m.role for m in members} == {"R1", "R2", "R3"}
        assert len({(m.voice, tuple(t.markup for t in m.turns)) for m in members}) == 1
        assert {m.instance for m in members} <= set(MATCHED_INSTANCES)
    assert sum(c.matched_audio for c in grid.cases) == 102
    # One voice per conversation, fixed across its levels (the case rows only point at the conversation).
    assert len({c.voice for c in grid.conversations}) > 1


def test_readback_targets_are_generated_exactly(grid) -> None:
    readback = [c for c in grid.conversations if c.base_action == "READBACK"]
    assert {(c.role, c.probe) for c in readback} == {("R1", "C2"), ("R3", "C2"), ("R6", "C2"), ("R6", "R6_B")}
    for conv in readback:
        chunks = [s.text for t in conv.turns for s in t.segments if s.mark == "chunk"]
        assert chunks and not check_target_in_chunks(conv.readback_target, chunks), conv.conversation_id
    phone = generate("phone", 3, 7, "k")
    assert re.fullmatch(r"\d{3}-\d{3}-\d{4}", phone.target)
    assert readback_tokens(" ".join(phone.chunks)) == readback_tokens(phone.target)
    assert generate("order", 4, 7, "k") == generate("order", 4, 7, "k") != generate("order", 4, 8, "k")


def test_readback_normalisation_and_coverage() -> None:
    assert readback_tokens("Call 555-0142, oh four!") == ["call", "5", "5", "5", "0", "1", "4", "2", "0", "4"]
    target = "4172 Maple Street, apartment 9"
    assert coverage(target, "four one seven two maple street apartment nine") == 1.0
    assert coverage(target, "4172 Maple St, apartment 9") == pytest.approx(7 / 8)
    # The 0.90 boundary: 9 of 10 tokens covered passes, 8 of 9 (0.89) does not.
    assert coverage("1 2 3 4 5 6 7 8 9 0", "1 2 3 4 5 6 7 8 9") == pytest.approx(0.9)
    assert coverage("1 2 3 4 5 6 7 8 9", "1 2 3 4 5 6 7 8") == pytest.approx(8 / 9)
    assert 8 / 9 < 0.9
    assert coverage("5 5", "5") == 0.5  # a decrementing multiset: one spoken 5 covers one target 5


def test_markup_round_trip_and_errors() -> None:
    segments, barge = parse_markup("so <trigger:no wait, 27> and <check:you there?> <pause:1.5s> ok")
    assert not barge and [s.mark for s in segments] == ["", "trigger", "", "check", "pause", ""]
    assert parse_markup(markup_of(segments))[0] == segments
    inner, barge = parse_markup("<barge_in:Sorry, <chunk:five five> then>")
    assert barge and [s.mark for s in inner] == ["", "chunk", ""]
    for bad in ("a <pause:2> b", "a <pause:x s> b", "a {c1} b", "a <check:> b", "a <barge_in:x> b"):
        with pytest.raises(SchemaError):
            parse_markup(bad)


def _timing(spec: list[tuple[str, str, float]]) -> list[SegmentTiming]:
    out, pos = [], 0.0
    for kind, mark, dur in spec:
        out.append(SegmentTiming(kind, mark, pos, round(pos + dur, 3)))
        pos = round(pos + dur, 3)
    return out


def test_windows_known_answers() -> None:
    c1 = _timing([("speech", "", 2.0), ("silence", "pause", 3.5), ("speech", "", 1.5)])
    assert window_rel("pause", "TAKE_TURN", c1, 7.0) == (2.0, 5.5)
    c4 = _timing([("speech", "", 2.0), ("speech", "check", 0.6), ("silence", "pause", 1.5), ("speech", "", 1.0)])
    assert window_rel("check", "BACKCHANNEL", c4, 5.1) == (2.0, 4.1)
    # A pause right after a check phrase is not a scored pause.
    r4b = _timing([("speech", "", 0.5), ("silence", "pause", 4.0), ("speech", "", 0.5), ("silence", "pause", 4.0),
                   ("speech", "", 0.5)])
    assert window_rel("pause", "LISTEN", r4b, 9.5) == (0.5, 9.0)
    trig = _timing([("speech", "", 1.0), ("speech", "trigger", 2.0), ("speech", "", 3.0)])
    assert window_rel("trigger", "INTERRUPT", trig, 6.0) == (3.0, 5.5)
    assert window_rel("trigger", "LISTEN", trig, 6.0) == (3.0, 6.0)
    dict_ = _timing([("speech", "", 1.0), ("speech", "chunk", 1.0), ("silence", "chunk_gap", 1.2),
                     ("speech", "chunk", 1.0), ("silence", "chunk_gap", 1.2), ("speech", "chunk", 1.0)])
    assert window_rel("dictation", "READBACK", dict_, 6.4) == (1.0, None)
    assert window_rel("gaps", "LISTEN", dict_, 6.4) == (2.0, 5.4)
    assert window_rel("barge", "YIELD", trig, 6.0) == (0.0, 3.0)


def test_leakage_gates_fail_naming_role_and_words() -> None:
    bank = load_texts()
    diags = [role_diagnostics(r, t.persona, t.directive) for r, t in bank.roles.items()]
    check_roles(diags)  # the shipped texts pass
    assert max(d.jaccard for d in diags) < 0.15 and all(60 <= d.persona_words <= 120 for d in diags)
    assert "R1" in format_diagnostics(diags) and "min / mean / max" in format_diagnostics(diags)
    r2 = bank.roles["R2"]
    leaky = r2.persona + " When they pause, you wait."
    with pytest.raises(UsageError, match=r"R2.*\['wait', 'pause'\]"):
        check_roles([role_diagnostics("R2", leaky, r2.directive)])
    # Word boundaries: "waiting" and "speaks" are not "wait" and "speak".
    assert not role_diagnostics("R2", r2.persona + " Waiting rooms; she speaks.", r2.directive).imperatives
    r4 = bank.roles["R4"]
    echo = r4.persona + " Listening sounds, gaps, ten seconds, fill, talk, next instruction due, whatsoever."
    with pytest.raises(UsageError, match=r"^leakage gate failed for R4: content-word Jaccard.*shared: .*whatsoever"):
        check_roles([role_diagnostics("R4", echo, r4.directive)])
    with pytest.raises(UsageError, match="R8: persona has 5 words"):
        check_roles([role_diagnostics("R8", "A stage, a scene, energy.", bank.roles["R8"].directive)])
    assert jaccard("the quick fox", "a quick dog")[1] == ["quick"]
    assert content_words("It's a Box's box, I") == {"box's", "box"}


def test_user_side_gate_names_conversation_and_words() -> None:
    with pytest.raises(UsageError, match=r"R1-C1-i5 t2.*\['let me finish', 'nurse'\]"):
        check_user_text("R1-C1-i5 t2", "Please let me finish, nurse.", ("nurse", "triage"))
    check_user_text("x", "No wait, it's forty-one twenty-seven.", ("dispatcher",))  # ordinary words pass
    bank = load_texts()
    cell = bank.table[("R6", "C3")]
    inst = bank.instance("R6", "C3", 1)
    roles = dict(bank.roles)
    roles["R6"] = replace(bank.roles["R6"], instances={**bank.roles["R6"].instances, "C3": {
        **bank.roles["R6"].instances["C3"], 1: replace(inst, t2="<barge_in:Sorry to interrupt, one thing.>")}})
    with pytest.raises(UsageError, match=r"R6-C3-i1 t2.*interrupt"):
        make_conversation(replace(bank, roles=roles), cell, 1, 0, VOICES)


def test_scripts_only_writes_conversations_and_manifest(tmp_path: Path) -> None:
    from dataset_builder.build import BuildOptions
    from dataset_builder.ifeval.build import build

    info = build(tmp_path, BuildOptions(preset="full", scripts_only=True))
    # 224 streams as in the paper, plus the 30 benign twins of the safety cells.
    assert info["n_cases"] == 1038 and info["n_audio_streams"] == 254 and info["n_benign_twins"] == 30
    scripts = [json.loads(x) for x in (tmp_path / "scripts.jsonl").read_text().splitlines()]
    manifest = [json.loads(x) for x in (tmp_path / "manifest.jsonl").read_text().splitlines()]
    assert len(scripts) == 270 and len(manifest) == 1038
    assert all(isinstance(s["safety_relevant"], bool) for s in scripts)
    assert all(c["rationale"] and c["label_rule"] for c in manifest)
    assert sum(len(s["cases"]) for s in scripts) == 1038
    assert not list(tmp_path.glob("data"))
    mini = build(tmp_path / "mini", BuildOptions(preset="mini", scripts_only=True))
    assert mini["n_conversations"] == 16 and mini["levels"] == {lv: n for lv, n in zip(
        LEVELS, (16, 16, 16, 16, 16, 3), strict=True)}
    # A mini conversation is the full set's conversation of its cell, word for word: composing fewer cells
    # changes none of them.
    full_scripts = {(s["conversation_id"], s["variant"]): s for s in scripts}
    mini_scripts = [json.loads(x) for x in (tmp_path / "mini" / "scripts.jsonl").read_text().splitlines()]
    assert len(mini_scripts) == 19 and all(s == full_scripts[(s["conversation_id"], s["variant"])]
                                              for s in mini_scripts)
    # `--n K` is every cell, K instances each.
    one = build(tmp_path / "n1", BuildOptions(n=1, scripts_only=True))
    assert one["n_conversations"] == 48 and one["n_cases"] == 246


def test_compose_refuses_an_unknown_cell() -> None:
    from dataset_builder.errors import UsageError
    from dataset_builder.ifeval.grid import compose

    with pytest.raises(UsageError, match="R9"):
        compose(0, ["a", "b"], (1,), cells=[("R1", "C1"), ("R9", "C1")])
