"""A user's own two-channel corpus to the M3 configs, through the CLI, as dataset_builder/m3/DESIGN.md
("Building from your own corpus") documents it: `duplex-eval events` measures the corpus's timing (here from word
timestamps, the `txt_align` layout a transcribed corpus converts to) and writes TimingStats with `--stats-out`;
`duplex-eval build m3 --stats FILE` places the synthetic dialogues with those timings, and `--diagnostics`
measures the built SHIFTs against the paper's task subset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from dataset_builder.rules.m3_timing_stats import load_stats
from eval.cli import main

GAPS = (0.40, 0.50)  # the corpus's SHIFT gaps, alternating: mean 0.45 s, the paper's English task mean


def _corpus_dialogue(folder: Path, name: str, turns: int = 24) -> tuple[Path, Path]:
    """A 2-channel WAV and its word timestamps: the parties take turns of four 0.35 s words (0.05 s apart),
    the gap before each turn alternating between GAPS; one party backchannels in every fourth turn."""
    lines, t = [], 0.5
    for k in range(turns):
        channel = k % 2
        for w in range(4):
            lines.append(f"{channel}\t{t:.3f}\t{t + 0.35:.3f}\tword{w}")
            if k % 4 == 2 and w == 1:  # a backchannel of the listener inside this turn
                lines.append(f"{1 - channel}\t{t + 0.1:.3f}\t{t + 0.5:.3f}\tyeah")
            t += 0.4
        t += GAPS[k % 2] - 0.05
    words = folder / f"{name}.txt"
    words.write_text("\n".join(lines) + "\n", encoding="utf-8")
    wav = folder / f"{name}.wav"
    sf.write(wav, np.zeros((int((t + 1.0) * 16000), 2), dtype=np.float32), 16000)
    return wav, words


def test_own_corpus_timing_to_a_built_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (a, wa), (b, wb) = _corpus_dialogue(corpus, "d1"), _corpus_dialogue(corpus, "d2")
    stats_file = tmp_path / "my_stats.json"
    assert main(["events", str(a), str(b), "--words", str(wa), "--words", str(wb),
                 "--stats-out", str(stats_file)]) == 0
    printed = capsys.readouterr().out
    assert f"timing stats of 2 dialogue(s) written to {stats_file}" in printed
    stats = load_stats(stats_file)
    assert stats.shift_gap_s is not None
    assert stats.shift_gap_s.values[0] == pytest.approx(0.40) and stats.shift_gap_s.values[-1] == pytest.approx(0.50)
    assert stats.shift_gap_s.mean == pytest.approx(0.45, abs=0.01)

    out = tmp_path / "m3"
    assert main(["build", "m3", "--n", "1", "--config", "m3_task_en", "--stats", str(stats_file), "--no-progress",
                 "--out", str(out), "--diagnostics"]) == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "diagnostics.json").read_text())
    shift = result["configs"]["m3_task_en"]["task"]["shift"]
    assert shift["source"] == "data/m3_task_en (SHIFT rows, t - s)" and shift["n"] >= 5
    # every built SHIFT was sampled from the corpus's gaps
    assert 0.40 - 0.01 <= shift["mean_s"] <= 0.50 + 0.01
    assert "task SHIFT mean vs the paper" in printed and "s vs 0.45 s" in printed
