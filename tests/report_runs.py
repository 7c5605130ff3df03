"""Scored run folders of every registered benchmark for the report tests, built once per test session.

Duplex-MPE: the real mini set, the real silent and oracle agents through the real runner and scorer (4 cases:
two explicit/implicit pairs, so the paired test has pairs), plus a hand-built run whose model talks through an N2
turn, with a failed episode.
DSB-IFEval and M3-DuplexBench: hand-built folders (tests/ifeval_handmade.py, tests/m3_handmade.py) with a failed
and, for M3, a skipped episode, scored by their real scorers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dataset_builder.audio import SESSION_SR, read_wav, write_wav
from eval.run import RunConfig, run
from metrics.ifeval.score import score_run as score_ifeval
from metrics.judges import HeuristicJudge
from metrics.m3.score import score_run as score_m3
from metrics.mpe.score import score_run as score_mpe
from metrics.scoring import score_run_dir
from tests import handmade
from tests import ifeval_handmade as IH
from tests import m3_handmade as MH
from tests.conftest import built_once
from tests.handmade import DeafASR

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
C1 = "My car broke down on the highway <pause:3.5s> and I am not sure what to do now."
R3A = "I am at forty two Oak Street <trigger:no wait, it is forty two Elm Street> near the old church."
M3_S = 4.0


def _zero(text: str) -> np.ndarray:
    return np.zeros(SESSION_SR, np.float32)


def _mpe_real(root: Path, dataset: Path) -> list[Path]:
    dirs = []
    for agent in ("silent", "oracle"):
        out = root / f"mpe-{agent}"
        args = {"cache_dir": str(CACHE)} if agent == "oracle" else {}
        counts = run(RunConfig(dataset=str(dataset), config="mpe", adapter=agent, out=str(out), adapter_args=args,
                               limit=4))
        assert counts["ok"] == 4, counts
        score_run_dir(out)
        dirs.append(out)
    return dirs


def _mpe_failed(root: Path, speech_from: Path) -> Path:
    """Episode A: the model talks through an N2 turn (2 s of real TTS speech, taken from a user channel of the
    real run); episode B failed."""
    out = root / "mpe-handmade"
    user, _ = read_wav(sorted(speech_from.glob("*.wav"))[0])
    talk = user[2 * SESSION_SR:4 * SESSION_SR, 0]
    start, _ = handmade.TIMES["t05"]
    handmade.write_episode(out, "A", "p0", "explicit", model=handmade.place(handmade.silence(), talk, start + 0.2))
    handmade.write_episode(out, "B", "p0", "implicit", status="failed", failure="step stalled")
    score_mpe(out, asr=DeafASR())
    return out


def _ifeval(root: Path) -> Path:
    out = root / "ifeval-handmade"
    made = {"listen1": IH.build(_zero, "R2", "C1", "L1", C1, "LISTEN", "pause"),
            "listen2": IH.build(_zero, "R2", "C1", "L2", C1, "LISTEN", "pause"),
            "take": IH.build(_zero, "R3", "C1", "L2", C1, "TAKE_TURN", "pause"),
            "l4a": IH.build(_zero, "R3", "R3_A", "L4a", R3A, "INTERRUPT", "trigger", expected_action="LISTEN"),
            "crash": IH.build(_zero, "R3", "R3_A", "L1", R3A, "INTERRUPT", "trigger")}
    for key, b in made.items():
        if key == "crash":
            IH.write(out, b, status="failed", failure="step raised RuntimeError: boom at t=3.000s")
        else:
            IH.write(out, b, capabilities=("system_prompt", "text_output"))
    score_ifeval(out, judge=HeuristicJudge())
    return out


def _m3(root: Path) -> Path:
    out = root / "m3-handmade"
    d = M3_S + 10.0
    for n, cond in enumerate(("none", "user", "full"), start=1):
        g = MH.gold("SHIFT", s=M3_S, t=M3_S + 0.3, event_n=1, condition=cond)
        spans = [(M3_S + 0.2 * n, M3_S + 2.0)]
        if cond == "full":
            MH.write(out, f"{g['event_id']}-full", g, MH.bursts(d, spans), status="skipped",
                     failure="the adapter has no teacher_forcing capability (Full context)")
            write_wav(out / f"{g['event_id']}-full.wav", np.zeros((0, 2), np.float32))  # as the runner leaves it
        else:
            MH.write(out, f"{g['event_id']}-{cond}", g, MH.bursts(d, spans))
    g = MH.gold("PAUSE", s=M3_S, t=M3_S + 2.0, event_n=2, condition="user")
    MH.write(out, f"{g['event_id']}-user", g, MH.bursts(d, []), status="failed", failure="step raised")
    score_m3(out, asr=DeafASR(), vad_factory=MH.planted)
    return out


def _all(root: Path, mini_dataset: Path) -> list[Path]:
    real = _mpe_real(root, mini_dataset)
    return [*real, _mpe_failed(root, real[0]), _ifeval(root), _m3(root)]


def report_runs(session: Path, mini_dataset: Path) -> list[Path]:
    """The scored run folders, built in the session's folder (tests/conftest.py `session_dir`) by whichever test (or
    pytest-xdist worker) asks first, and read by the others."""
    return built_once(session, "report-runs", lambda root: _all(root, mini_dataset))[1]
