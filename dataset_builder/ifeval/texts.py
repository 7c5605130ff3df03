"""Load and validate the DSB-IFEval text files (`texts/`): the action table, the eight roles, the matched-audio
texts and the L4a contradictions. Every problem is a SchemaError naming the file and the field."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dataset_builder.ifeval.gates import persona_why_problems
from dataset_builder.ifeval.readback import KINDS
from dataset_builder.ifeval.schema import (
    ACTIONS,
    EVENT_ACTIONS,
    INSTANCES,
    MATCHED_INSTANCES,
    MATCHED_PROBES,
    MATCHED_ROLES,
    N_L4A_VARIANTS,
    ROLES,
    SAFETY_CELLS,
    SHARED_PROBES,
    role_probes,
)
from dataset_builder.schema import SchemaError

TEXTS_DIR = Path(__file__).resolve().parent / "texts"


@dataclass(frozen=True)
class Cell:
    """One row of the action table: a (role, probe) cell."""

    role: str
    probe: str
    action: str  # base action, scored at L0-L3
    event: str  # the probe's trigger event
    l4a: str  # the action the L4a contradiction asks for
    l4b_action: str = ""  # safety cells only
    l4b_event: str = ""
    barge_in_after_s: float | None = None
    why: str = ""  # the directive clause (or persona fact) that fixes the base action: the L0-L3 rationale
    l4b_why: str = ""  # safety cells: why the role-critical behaviour must win at L4b
    max_pause_s: float | None = None  # the role's rule bounds its hold-off: no mid-turn pause is drawn longer
    persona_why: str = ""  # what the persona alone gives for the target (the L2 rationale), quoting the persona
    mid_clause: bool = False  # the silence it scores falls inside an unfinished clause (gates.mid_clause_problems)

    def scored(self, level: str) -> tuple[str, str]:
        """(action, event) scored at `level`; READBACK is always scored at the dictation event."""
        if level == "L4a":
            action, event = self.l4a, self.event
        elif level == "L4b":
            action, event = self.l4b_action, self.l4b_event or self.event
        else:
            action, event = self.action, self.event
        return action, ("dictation" if action == "READBACK" else event)


@dataclass(frozen=True)
class Instance:
    t1: str
    t2: str
    readback: str = ""  # readback kind when the text has {cN} slots
    benign: Instance | None = None  # safety cells: the non-urgent twin, same structure and slots


@dataclass(frozen=True)
class RoleText:
    role: str
    name: str
    persona: str
    directive: str
    role_nouns: tuple[str, ...]
    l4b: dict[str, str]
    instances: dict[str, dict[int, Instance]]  # probe -> instance number -> texts


@dataclass(frozen=True)
class TextBank:
    table: dict[tuple[str, str], Cell]
    roles: dict[str, RoleText]
    contradictions: dict[str, list[str]]  # "BASE->L4A" -> five variants

    def instance(self, role: str, probe: str, instance: int) -> Instance:
        return self.roles[role].instances[probe][instance]

    def contradiction(self, cell: Cell, instance: int) -> str:
        return self.contradictions[f"{cell.action}->{cell.l4a}"][instance - 1]


def _load(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise SchemaError(f"not valid YAML ({err})", source=str(path)) from None


def _need(cond: bool, message: str, path: Path, fld: str) -> None:
    if not cond:
        raise SchemaError(message, source=str(path), field=fld)


def load_table(path: Path) -> dict[tuple[str, str], Cell]:
    data = _load(path)
    cells: dict[tuple[str, str], Cell] = {}

    def cell(role: str, probe: str, spec: dict[str, Any], event: str, barge: float | None, fld: str) -> None:
        l4b = spec.get("l4b") or {}
        c = Cell(role, probe, spec["action"], spec.get("event", event), spec["l4a"], l4b.get("action", ""),
                 l4b.get("event", ""), spec.get("barge_in_after_s", barge), " ".join(str(spec.get("why", "")).split()),
                 " ".join(str(l4b.get("why", "")).split()), spec.get("max_pause_s"),
                 " ".join(str((data.get("persona_why") or {}).get(role, {}).get(probe, "")).split()),
                 bool(spec.get("mid_clause", False)))
        _need(bool(c.why), "every cell needs `why` (the rule that fixes its base action)", path, fld)
        _need(bool(c.persona_why), f"every cell needs `persona_why.{role}.{probe}` (what the persona gives)", path,
              fld)
        _need(bool(c.l4b_why) == bool(c.l4b_action), "`l4b.why` goes with `l4b.action`", path, fld)
        for level in ("L0", "L4a", *(("L4b",) if c.l4b_action else ())):
            action, ev = c.scored(level)
            _need(action in ACTIONS, f"action {action!r} unknown", path, fld)
            _need(action in EVENT_ACTIONS.get(ev, ()), f"{action} cannot be scored at a {ev!r} event", path, fld)
        _need(bool(c.l4b_action) == ((role, probe) in SAFETY_CELLS), "l4b is set on exactly the safety cells",
              path, fld)
        _need((c.event == "barge") == (c.barge_in_after_s is not None), "barge_in_after_s on barge probes only",
              path, fld)
        _need(c.max_pause_s is None or (c.event == "pause" and float(c.max_pause_s) > 0),
              "max_pause_s (seconds) only on a pause probe", path, fld)
        cells[(role, probe)] = c

    for probe, spec in data["shared"].items():
        _need(probe in SHARED_PROBES, f"unknown shared probe {probe!r}", path, "shared")
        _need(sorted(spec["roles"]) == sorted(ROLES), "a shared probe lists every role", path, f"shared.{probe}")
        for role, rspec in spec["roles"].items():
            cell(role, probe, rspec, spec["event"], spec.get("barge_in_after_s"), f"shared.{probe}.roles.{role}")
    for probe, spec in data["specific"].items():
        role = probe.split("_")[0]
        _need(role in ROLES and probe in role_probes(role), f"unknown probe {probe!r}", path, "specific")
        cell(role, probe, spec, spec["event"], spec.get("barge_in_after_s"), f"specific.{probe}")
    want = {(r, p) for r in ROLES for p in role_probes(r)}
    _need(set(cells) == want, f"cells missing: {sorted(want - set(cells))}", path, "")
    return cells


def _instances(role: str, data: dict[str, Any], matched: dict[str, list[dict[str, str]]], path: Path
               ) -> dict[str, dict[int, Instance]]:
    out: dict[str, dict[int, Instance]] = {}
    listed = data.get("instances") or {}
    _need(sorted(listed) == sorted(role_probes(role)), f"instances must list exactly {role_probes(role)}", path,
          "instances")
    for probe in role_probes(role):
        shared = role in MATCHED_ROLES and probe in MATCHED_PROBES
        numbers = [i for i in INSTANCES if not (shared and i in MATCHED_INSTANCES)]
        items = listed[probe] or []
        _need(len(items) == len(numbers), f"{probe} needs {len(numbers)} instance(s), has {len(items)}", path,
              f"instances.{probe}")
        cell: dict[int, Instance] = {}
        safety = (role, probe) in SAFETY_CELLS
        for n, item in zip(numbers, items, strict=True):
            where = f"instances.{probe}[{n}]"
            unknown = sorted(set(item) - {"t1", "t2", "readback", "benign"})
            _need(not unknown and "t1" in item and "t2" in item, f"instance {n} needs t1 and t2 (unknown {unknown})",
                  path, where)
            kind = item.get("readback", "")
            _need(kind in ("", *KINDS), f"readback kind {kind!r} not in {KINDS}", path, where)
            twin = item.get("benign")
            _need(bool(twin) == safety, "a `benign` twin (t1, t2) is required on the safety cells, and only there",
                  path, where + ".benign")
            benign = None
            if twin:
                _need(sorted(twin) == ["t1", "t2"], "`benign` holds exactly t1 and t2", path, where + ".benign")
                benign = Instance(" ".join(twin["t1"].split()), " ".join(twin["t2"].split()), kind)
            cell[n] = Instance(" ".join(item["t1"].split()), " ".join(item["t2"].split()), kind, benign)
        if shared:
            for n in MATCHED_INSTANCES:
                m = matched[probe][n - 1]
                cell[n] = Instance(" ".join(m["t1"].split()), " ".join(m["t2"].split()))
        out[probe] = dict(sorted(cell.items()))
    return out


@functools.cache
def load_texts(texts_dir: Path = TEXTS_DIR) -> TextBank:
    """The whole text bank, validated (cached: the files are part of the package)."""
    table = load_table(texts_dir / "probes.yaml")
    matched_path = texts_dir / "matched.yaml"
    matched = _load(matched_path)
    for probe in MATCHED_PROBES:
        _need(len(matched.get(probe) or []) == len(MATCHED_INSTANCES),
              f"{probe} needs {len(MATCHED_INSTANCES)} matched instances", matched_path, probe)
    roles: dict[str, RoleText] = {}
    for role in ROLES:
        path = texts_dir / "roles" / f"{role}.yaml"
        data = _load(path)
        _need(data.get("role") == role, f"file declares role {data.get('role')!r}", path, "role")
        for key in ("name", "persona", "directive", "role_nouns"):
            _need(bool(data.get(key)), f"{key} is missing", path, key)
        l4b = {k: " ".join(v.split()) for k, v in (data.get("l4b") or {}).items()}
        want = sorted(p for r, p in SAFETY_CELLS if r == role)
        _need(sorted(l4b) == want, f"l4b must cover exactly {want}", path, "l4b")
        roles[role] = RoleText(role, data["name"], " ".join(data["persona"].split()),
                               " ".join(data["directive"].split()), tuple(data["role_nouns"]), l4b,
                               _instances(role, data, matched, path))
    for (role, probe), c in table.items():  # an L2 rationale cites only what the persona says
        problems = persona_why_problems(c.persona_why, roles[role].persona)
        _need(not problems, f"{'; '.join(problems)}", texts_dir / "probes.yaml", f"persona_why.{role}.{probe}")
    c_path = texts_dir / "contradictions.yaml"
    contradictions = {k: [" ".join(v.split()) for v in vs] for k, vs in _load(c_path).items()}
    for c in table.values():
        key = f"{c.action}->{c.l4a}"
        _need(len(contradictions.get(key, [])) == N_L4A_VARIANTS, f"{key} needs {N_L4A_VARIANTS} variants",
              c_path, key)
    return TextBank(table, roles, contradictions)
