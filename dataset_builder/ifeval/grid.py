"""Compose the DSB-IFEval grid from the text bank: conversations (one per role, probe, instance) and cases (one
per conversation and level), deterministic in the seed and the voice bank. No audio here."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from dataset_builder.errors import UsageError
from dataset_builder.ifeval.gates import check_roles, check_user_text, role_diagnostics
from dataset_builder.ifeval.readback import check_target_in_chunks, generate
from dataset_builder.ifeval.schema import (
    INSTANCES,
    L0_INSTANCES,
    LEVELS,
    MATCHED_INSTANCES,
    MATCHED_PROBES,
    MATCHED_ROLES,
    RESOLUTIONS,
    ROLES,
    SAFETY_CELLS,
    Conversation,
    IFEvalCase,
    UserTurn,
    case_id,
    check_event,
    conversation_id,
    parse_markup,
    role_probes,
    spoken_text,
    verifier_params,
)
from dataset_builder.ifeval.texts import Cell, TextBank, load_texts

PRESET_INSTANCES: dict[str, tuple[int, ...]] = {"mini": (1,), "full": INSTANCES}
_SLOT = re.compile(r"\{c(\d+)\}")


@dataclass(frozen=True)
class Grid:
    conversations: list[Conversation]
    cases: list[IFEvalCase]

    def cases_of(self, conv: Conversation) -> list[IFEvalCase]:
        return [c for c in self.cases if c.conversation_id == conv.conversation_id]


def _hash_int(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "little")


def matched_group(role: str, probe: str, instance: int) -> str:
    if role in MATCHED_ROLES and probe in MATCHED_PROBES and instance in MATCHED_INSTANCES:
        return f"M-{probe}-i{instance}"
    return ""


def pick_voice(voices: Sequence[str], seed: int, key: str) -> str:
    """One voice per conversation (per matched group, so the group's audio is one), from the seed."""
    if not voices:
        raise UsageError("the TTS backend offers no human voices")
    return voices[_hash_int(seed, key, "voice") % len(voices)]


def _fill(text: str, chunks: list[str]) -> str:
    return _SLOT.sub(lambda m: f"<chunk:{chunks[int(m.group(1)) - 1]}>", text)


def make_conversation(bank: TextBank, cell: Cell, instance: int, seed: int, voices: Sequence[str]
                      ) -> Conversation:
    """One conversation: slots filled with generated dictation values, turns parsed, voice chosen, checked."""
    role, probe = cell.role, cell.probe
    cid = conversation_id(role, probe, instance)
    inst = bank.instance(role, probe, instance)
    group = matched_group(role, probe, instance)
    slots = sorted({int(n) for n in _SLOT.findall(inst.t1 + " " + inst.t2)})
    target, kind = "", inst.readback
    t1, t2 = inst.t1, inst.t2
    if slots:
        if not kind or slots != list(range(1, len(slots) + 1)):
            raise UsageError(f"{cid}: slots {{c1}}..{{cN}} need a readback kind and consecutive numbers")
        dictation = generate(kind, len(slots), seed, cid)
        t1, t2, target = _fill(t1, dictation.chunks), _fill(t2, dictation.chunks), dictation.target
        missing = check_target_in_chunks(target, dictation.chunks)
        if missing:
            raise UsageError(f"{cid}: readback target tokens {missing} are not in the dictated chunks")
    elif kind:
        raise UsageError(f"{cid}: readback kind {kind!r} but no {{cN}} slots in the text")
    turns = []
    for turn_id, text in (("t1", t1), ("t2", t2)):
        segments, barge = parse_markup(text, f"{cid}.{turn_id}")
        turns.append(UserTurn(turn_id, text, segments, "barge_in" if barge else "take_turn"))
        check_user_text(f"{cid} {turn_id}", spoken_text(segments), bank.roles[role].role_nouns)
    if group:  # the shared text must pass every role's user-side gate that hears it
        for other in MATCHED_ROLES:
            check_user_text(f"{cid} (matched, as {other})", " ".join(spoken_text(t.segments) for t in turns),
                            bank.roles[other].role_nouns)
    conv = Conversation(
        conversation_id=cid, role=role, probe=probe, instance=instance, seed=seed,
        voice=pick_voice(voices, seed, group or cid), turns=turns, base_action=cell.action,
        base_event=cell.event, barge_in_after_s=cell.barge_in_after_s, readback_target=target,
        readback_kind=kind if target else "", matched_group=group)
    conv.validate()
    for level in LEVELS:  # every scored event has what its window needs
        if level_applies(cell, instance, level):
            check_event(conv.turn2.segments, cell.scored(level)[1], f"{cid} at {level}")
    return conv


def level_applies(cell: Cell, instance: int, level: str) -> bool:
    if level == "L0":
        return instance in L0_INSTANCES
    if level == "L4b":
        return (cell.role, cell.probe) in SAFETY_CELLS
    return True


def system_prompt(bank: TextBank, cell: Cell, instance: int, level: str) -> tuple[str, str, int]:
    """(system prompt, contradiction, L4a variant) of a level, exactly as App. B.4."""
    role = bank.roles[cell.role]
    if level == "L0":
        return "", "", 0
    if level == "L1":
        return role.directive, "", 0
    if level == "L2":
        return role.persona, "", 0
    if level == "L3":
        return f"{role.persona}\n\n{role.directive}", "", 0
    if level == "L4a":
        line = bank.contradiction(cell, instance)
        return f"{role.persona}\n\n{line}", line, instance
    line = role.l4b[cell.probe]
    return f"{role.persona}\n\n{line}", line, 0


def make_cases(bank: TextBank, cell: Cell, conv: Conversation) -> list[IFEvalCase]:
    cases = []
    for level in LEVELS:
        if not level_applies(cell, conv.instance, level):
            continue
        action, event = cell.scored(level)
        prompt, line, variant = system_prompt(bank, cell, conv.instance, level)
        case = IFEvalCase(
            case_id=case_id(cell.role, cell.probe, conv.instance, level), conversation_id=conv.conversation_id,
            role=cell.role, probe=cell.probe, instance=conv.instance, level=level, system_prompt=prompt,
            expected_action=action, base_action=cell.action, event=event,
            resolution_target=RESOLUTIONS.get(level, ""), contradiction=line, contradiction_variant=variant,
            verifier=verifier_params(action, cell.role), matched_audio=bool(conv.matched_group),
            matched_group=conv.matched_group)
        case.validate()
        cases.append(case)
    return cases


def check_gates(bank: TextBank) -> None:
    """The leakage gates of every role (the build fails on the first violation, naming role and words)."""
    check_roles(role_diagnostics(r, t.persona, t.directive) for r, t in bank.roles.items())


def compose(seed: int, voices: Sequence[str], instances: Sequence[int] = INSTANCES,
            bank: TextBank | None = None) -> Grid:
    """The grid in order role, probe, instance; cases in level order after their conversation."""
    bank = bank or load_texts()
    check_gates(bank)
    conversations, cases = [], []
    for role in ROLES:
        for probe in role_probes(role):
            cell = bank.table[(role, probe)]
            for instance in instances:
                conv = make_conversation(bank, cell, instance, seed, voices)
                conversations.append(conv)
                cases.extend(make_cases(bank, cell, conv))
    return Grid(conversations, cases)


def action_counts(cases: Sequence[IFEvalCase]) -> dict[str, Counter[str]]:
    """Per-action case counts: by the scored action, and by the cell's base action (App. B.1's counting)."""
    return {"scored": Counter(c.expected_action for c in cases), "base": Counter(c.base_action for c in cases)}


def level_counts(cases: Sequence[IFEvalCase]) -> Counter[str]:
    return Counter(c.level for c in cases)
