"""`duplex-eval report`: the static HTML report of scored runs (eval/report_site/site.py has its layout).

People look before they read: a leaderboard per benchmark with intervals and paired tests, the breakdowns,
each run's health and live feasibility, and a page per episode with its timeline (both channels, the user's
clips by label, the model's VAD speech, each scored window coloured by its verdict), its audio, transcripts and
gold. The numbers are read from each run's scores.json, never recomputed.
"""

from __future__ import annotations

from pathlib import Path

from eval.report_site.collect import load_scores
from eval.report_site.media import DEFAULT_KBPS
from eval.report_site.site import write_site

__all__ = ["load_scores", "write_report"]


def write_report(run_dirs: list[Path], out: Path, max_plots: int | None = None, allow_stale: bool = False,
                 audio_kbps: float = DEFAULT_KBPS, progress: bool = False) -> Path:
    """The report of these runs (its index.html); a run whose scores no longer match its folder is refused
    (UsageError naming the fix), or with `allow_stale` shown under a STALE banner and marked STALE in the tables.
    `max_plots` caps the episodes per run that get a figure and audio (None: every episode); `progress` prints a
    progress line while recordings are encoded."""
    return write_site(run_dirs, out, max_plots=max_plots, allow_stale=allow_stale, audio_kbps=audio_kbps,
                      progress=progress)
