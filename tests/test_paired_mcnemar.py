"""The paired explicit-vs-implicit McNemar test through the public `evaluate` module (tests/MUTATION.md, bug 4).

McNemar's test looks at discordant pairs only. The cases here have concordant successes too, so the test on the
discordant pairs and the same test run on all pairs' success counts give different p-values (hand-computed
below); a scorer that passes the wrong counts to `mcnemar_exact` fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metrics import EVALUATE_MODULES
from metrics.mpe.verdicts import RECORDED

ROOT = Path(__file__).resolve().parent.parent


def _t(pair: str, cond: str, responded: bool) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "T", "label": "T",
            "turn_id": "t03", "t_end_s": 20.0, "next_start_s": 30.0, "active_at_end": False,
            "onset_latency_s": 1.0 if responded else None, "response_spans": [], "transcript": "",
            "answer_verdict": "correct" if responded else None,
            RECORDED: {"t_onset_window_s": 5.0, "yield_tolerance_s": 1.0}}  # as score stores it


@pytest.fixture(scope="module")
def mpe_metric() -> Any:
    import evaluate

    return evaluate.load(str(EVALUATE_MODULES / "duplex_mpe"), keep_in_memory=True)


def test_paired_mcnemar_uses_only_discordant_pairs(mpe_metric: Any) -> None:
    """tests/MUTATION.md bug 4: McNemar on the discordant pairs (6 explicit-only, 0 implicit-only), not on all
    successes.

    12 pairs: 5 where both respond, 6 explicit-only, 1 where neither does. Exact McNemar: 2 * (1/2)^6 = 0.03125.
    The same test on the success counts (11 explicit vs 5 implicit) would give 2 * 6885 / 65536 = 0.2101.
    """
    outcomes = [(True, True)] * 5 + [(True, False)] * 6 + [(False, False)]
    records = [r for i, (e, m) in enumerate(outcomes) for r in (_t(f"p{i}", "explicit", e), _t(f"p{i}", "implicit", m))]
    res = mpe_metric.compute(measurements=[json.dumps(r) for r in records])
    for metric in ("response_presence", "fresh_onset_rate"):
        paired = res["paired"][metric]
        assert (paired["n_pairs"], paired["explicit_only"], paired["implicit_only"]) == (12, 6, 0)
        assert paired["difference"] == pytest.approx((11 - 5) / 12)
        assert paired["mcnemar_p"] == pytest.approx(0.03125, rel=1e-12)
        assert paired["mcnemar_p"] != pytest.approx(2 * 6885 / 65536)


def test_paired_mcnemar_two_sided_with_both_directions(mpe_metric: Any) -> None:
    # 3 both, 9 explicit-only, 2 implicit-only, 4 neither: p = 2 * (1 + 11 + 55) / 2048 on the 11 discordant.
    outcomes = [(True, True)] * 3 + [(True, False)] * 9 + [(False, True)] * 2 + [(False, False)] * 4
    records = [r for i, (e, m) in enumerate(outcomes) for r in (_t(f"p{i}", "explicit", e), _t(f"p{i}", "implicit", m))]
    # An unpaired case (no implicit twin) counts in the rates but not in the paired test.
    records.append(_t("lonely", "explicit", True))
    res = mpe_metric.compute(measurements=[json.dumps(r) for r in records])
    paired = res["paired"]["response_presence"]
    assert (paired["n_pairs"], paired["explicit_only"], paired["implicit_only"]) == (18, 9, 2)
    assert paired["difference"] == pytest.approx((12 - 5) / 18)
    assert paired["mcnemar_p"] == pytest.approx(2 * 67 / 2048, rel=1e-12)
    assert res["scores"]["response_presence"]["n"] == 37
