"""Duplex-MPE scores for a run folder: measure every episode, then aggregate verdicts.

    RUN_DIR/measurements.jsonl   one record per scored window (thresholds not applied)
    RUN_DIR/scores.json          {"benchmark": "mpe", "adapter": ..., "scores": {...}, "by_condition": ...}
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json, atomic_write_text
from dataset_builder.audio import read_wav
from dataset_builder.episode import Episode
from metrics.mpe.measure import measure_episode, span_audio
from metrics.mpe.verdicts import METRICS, Thresholds, outcomes
from metrics.spans import Span
from metrics.stats import mcnemar_exact, wilson_interval

LABEL_GROUPS = {"T": ("fresh_onset_rate", "response_presence", "answer_accuracy"),
                "N1": ("silence_preservation",), "N2": ("silence_preservation",),
                "N3": ("silence_preservation",), "N4": ("window_response", "answering_window_yield")}


def summarise(successes: list[bool]) -> dict[str, Any]:
    n, k = len(successes), sum(successes)
    ci = wilson_interval(k, n) if n else None
    return {"value": k / n if n else None, "n": n, "k": k,
            "ci": [round(ci[0], 4), round(ci[1], 4)] if ci else None}


def aggregate(measurements: list[dict[str, Any]], th: Thresholds) -> dict[str, Any]:
    per: dict[tuple[str, str, str], list[bool]] = defaultdict(list)  # (condition, label, metric)
    for m in measurements:
        for metric, ok in outcomes(m, th).items():
            per[(m["condition"], m["label"], metric)].append(ok)

    def pick(cond: str | None = None, label: str | None = None) -> dict[str, Any]:
        return {metric: summarise([ok for (c, lab, mt), oks in per.items() for ok in oks
                                   if mt == metric and cond in (None, c) and label in (None, lab)])
                for metric in METRICS}

    conditions = sorted({m["condition"] for m in measurements})
    by_label = {lab: {mt: pick(label=lab)[mt] for mt in metrics} for lab, metrics in LABEL_GROUPS.items()}
    return {"scores": pick(), "by_condition": {c: pick(cond=c) for c in conditions}, "by_label": by_label,
            "paired": paired_tests(measurements, th)}


def paired_summary(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """(explicit, implicit) outcomes of complete pairs -> rate difference and exact McNemar p."""
    b = sum(1 for e, i in pairs if e and not i)
    c = sum(1 for e, i in pairs if i and not e)
    n = len(pairs)
    return {"n_pairs": n, "explicit_only": b, "implicit_only": c,
            "difference": (sum(e for e, _ in pairs) - sum(i for _, i in pairs)) / n if n else None,
            "mcnemar_p": mcnemar_exact(b, c) if n else None}


def paired_tests(measurements: list[dict[str, Any]], th: Thresholds) -> dict[str, Any]:
    """Explicit vs implicit on the same scenario: rate difference and exact McNemar on discordant pairs."""
    by_pair: dict[str, dict[str, dict[str, bool]]] = defaultdict(dict)
    for m in measurements:
        if m["kind"] == "T":
            by_pair[m["pair_id"]][m["condition"]] = outcomes(m, th)
    out: dict[str, Any] = {}
    for metric in ("response_presence", "fresh_onset_rate"):
        out[metric] = paired_summary([(p["explicit"][metric], p["implicit"][metric]) for p in by_pair.values()
                                      if "explicit" in p and "implicit" in p])
    return out


def vad_from_params(params: dict[str, Any]) -> Any:
    """The batch VAD with the parameters the episode was recorded under."""
    from metrics.vad import SileroVAD, VADParams

    known = {f.name for f in fields(VADParams)}
    return SileroVAD(VADParams(**{k: v for k, v in params.items() if k in known}))


def load_episodes(run_dir: Path) -> list[Episode]:
    return [Episode.load(p) for p in sorted(Path(run_dir).glob("*.rec.json"))]


def measure_run(run_dir: Path, episodes: list[Episode], asr: Any, judge: Any, vad_factory: Any
                ) -> tuple[list[dict], list[dict]]:
    """Measurements of every ok episode, and the failed episodes with their reasons."""
    measurements: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for ep in episodes:
        if ep.benchmark != "mpe":
            continue
        if ep.status != "ok":
            failed.append({"case_id": ep.case_id, "status": ep.status, "reason": ep.failure})
            continue
        audio, sr = read_wav(Path(run_dir) / f"{ep.case_id}.wav")
        model = audio[:, 1]
        spans = vad_factory(ep.params.get("vad", {})).spans(model, sr)

        def transcribe(sp: list[Span], model=model, sr=sr) -> str:
            return asr.transcribe(span_audio(model, sr, sp), sr)

        for m in measure_episode(ep, spans, transcribe, judge):
            measurements.append(m | {"model_spans_n": len(spans)})
    return measurements, failed


def score_run(run_dir: Path, *, asr: Any = None, judge: Any = None, overrides: dict[str, float] | None = None,
              reuse_measurements: bool = False) -> dict[str, Any]:
    """Score a run folder; with `reuse_measurements`, only re-apply thresholds to measurements.jsonl."""
    run_dir = Path(run_dir)
    episodes = load_episodes(run_dir)
    if not episodes:
        raise FileNotFoundError(f"{run_dir}: no *.rec.json episodes to score")
    mpath = run_dir / "measurements.jsonl"
    if reuse_measurements and mpath.exists():
        meta = json.loads((run_dir / "scores.json").read_text())
        measurements = [json.loads(line) for line in mpath.read_text().splitlines() if line.strip()]
        failed, asr_name, judge_info = meta["failed_episodes"], meta["asr"], meta["judge"]
    else:
        from metrics.asr import DEFAULT_ASR, get_asr
        from metrics.judges import get_judge

        asr = asr or get_asr(DEFAULT_ASR)
        judge = judge or get_judge("heuristic")
        measurements, failed = measure_run(run_dir, episodes, asr, judge, vad_from_params)
        atomic_write_text(mpath, "".join(json.dumps(m) + "\n" for m in measurements))
        asr_name, judge_info = asr.name, {"name": judge.name, "heuristic": bool(judge.heuristic)}
    ok_eps = [e for e in episodes if e.status == "ok"]
    run_params = dict(ok_eps[0].params["protocol"]) if ok_eps else {}
    th = Thresholds.from_params(run_params | (overrides or {}))
    result = {
        "benchmark": "mpe",
        "adapter": episodes[0].adapter.get("name"),
        "adapter_info": episodes[0].adapter,
        "asr": asr_name,
        "judge": judge_info,
        "thresholds": asdict(th),
        "n_episodes": len(episodes),
        "n_failed": len(failed),
        "failed_episodes": failed,
        **aggregate(measurements, th),
    }
    atomic_write_json(run_dir / "scores.json", result)
    return result
