"""The transcript-conditioned reference (docs/benchmarks/mpe.md, optional): decide respond/silent from
speaker-attributed text.

Given the duty preamble, the conversation so far as "Speaker: text" lines and the current utterance, a
decider says whether Aria should respond and, for T, what it would answer. It isolates the addressing
decision from acoustics: the paper's Gemini reference shows how much the explicit/implicit rewrite alone
changes a text-level decision. Deciders: `policy` (the cascade's rules on perfect transcripts; heuristic)
and `openai` (any OpenAI-compatible chat endpoint).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from adapters.cascade_policy import Policy
from dataset_builder.atomic import atomic_write_json, atomic_write_text
from dataset_builder.registry import LazyRegistry
from dataset_builder.schema import SILENT_LABELS, Case
from metrics.judges import HeuristicJudge
from metrics.mpe.aggregate import paired_summary
from metrics.stats import summarise

SCORED_LABELS = ("T", *SILENT_LABELS)

_PROMPT = """{duty}

The conversation so far, one line per turn:
{history}

The latest turn:
{current}

Should Aria speak now? If it should, also give the short answer it would say.
Reply with JSON only: {{"respond": true, "answer": "..."}} or {{"respond": false}}."""


@dataclass(frozen=True)
class Decision:
    respond: bool
    answer: str = ""
    raw: str = ""


class Decider(Protocol):
    name: str
    heuristic: bool

    def start(self, duty: str) -> None: ...

    def decide(self, history: list[tuple[str, str]], speaker: str, text: str) -> Decision: ...


class PolicyDecider:
    """The cascade's policy on the exact script text: its addressing rule without ASR errors."""

    name = "cascade-policy"
    heuristic = True

    def start(self, duty: str) -> None:
        self.policy = Policy()

    def decide(self, history: list[tuple[str, str]], speaker: str, text: str) -> Decision:
        reply = self.policy.hear(text)
        return Decision(reply is not None, reply or "", reply or "")


class ChatDecider:
    def __init__(self, base_url: str | None = None, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 cache_dir: str | None = None) -> None:
        from dataset_builder.openai_compat import check_endpoint
        from metrics.judges import OpenAIJudge

        base_url, model = check_endpoint(base_url, model, "--decider openai", "--decider-arg", api_key_env)
        self.client = OpenAIJudge(base_url, model, api_key_env=api_key_env,
                                  cache_dir=Path(cache_dir) if cache_dir else None)
        self.name = f"openai:{model}"
        self.heuristic = False
        self.duty = ""

    def start(self, duty: str) -> None:
        self.duty = duty

    def decide(self, history: list[tuple[str, str]], speaker: str, text: str) -> Decision:
        lines = "\n".join(f"{s}: {t}" for s, t in history) or "(nothing yet)"
        raw = self.client.ask(_PROMPT.format(duty=self.duty, history=lines, current=f"{speaker}: {text}"))
        try:
            obj = json.loads(raw.strip().removeprefix("```json").removesuffix("```").strip())
            return Decision(bool(obj["respond"]), str(obj.get("answer") or ""), raw)
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            return Decision(False, "", raw)  # unparseable: no response, recorded as raw evidence


_DECIDERS = LazyRegistry("decider", {
    "policy": "eval.text_reference:PolicyDecider",
    "openai": "eval.text_reference:ChatDecider",
}, option="--decider", arg_option="--decider-arg")


def get_decider(name: str, **kwargs: Any) -> Decider:
    return _DECIDERS.load(name, **kwargs)


def decide_case(case: Case, decider: Decider) -> list[dict[str, Any]]:
    decider.start(case.preamble_text)
    history: list[tuple[str, str]] = []
    rows = []
    for turn in case.script.turns:
        d = decider.decide(history, turn.speaker, turn.text)
        history.append((turn.speaker, turn.text))
        if turn.label in SCORED_LABELS:
            rows.append({"case_id": case.case_id, "pair_id": case.script.pair_id,
                         "condition": case.script.condition, "turn_id": turn.turn_id, "label": turn.label,
                         "respond": d.respond, "answer": d.answer, "raw": d.raw})
    return rows


def text_reference(cases: list[Case], decider: Decider, out: Path) -> dict[str, Any]:
    judge = HeuristicJudge()
    gold = {c.case_id: c.script for c in cases}
    rows = [r for c in cases for r in decide_case(c, decider)]
    for r in rows:
        if r["label"] == "T" and r["respond"]:
            s = gold[r["case_id"]]
            r["answer_verdict"] = judge.judge_answer(s.question, s.gold_answer, s.gold_aliases, r["answer"]).label

    def block(cond: str | None) -> dict[str, Any]:
        mine = [r for r in rows if cond in (None, r["condition"])]
        t = [r for r in mine if r["label"] == "T"]
        return {"response_rate": summarise([r["respond"] for r in t]),
                "answer_accuracy": summarise([r["answer_verdict"] == "correct" for r in t if r["respond"]]),
                "silence_preservation": summarise([not r["respond"] for r in mine if r["label"] != "T"])}

    by_pair: dict[str, dict[str, bool]] = {}
    for r in rows:
        if r["label"] == "T":
            by_pair.setdefault(r["pair_id"], {})[r["condition"]] = r["respond"]
    pairs = [(p["explicit"], p["implicit"]) for p in by_pair.values() if len(p) == 2]
    result = {
        "reference": "transcript-conditioned", "decider": decider.name, "heuristic": decider.heuristic,
        "answer_judge": {"name": judge.name, "heuristic": True}, "n_cases": len(cases),
        "scores": block(None), "by_condition": {k: block(k) for k in ("explicit", "implicit")},
        "paired": paired_summary(pairs),
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "text_reference.json", result)
    atomic_write_text(out / "text_reference_decisions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return result
