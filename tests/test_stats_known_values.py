"""Statistics against published and hand-computed values, in cases where the plausible variants differ
(tests/MUTATION.md).

Wilson score intervals: Newcombe (1998), "Two-sided confidence intervals for the single proportion: comparison
of seven methods", Statistics in Medicine 17:857-872, Table I, method 3 (score interval without continuity
correction), four decimals. Exact McNemar: two-sided binomial test on the discordant pairs only, hand-computed
from binomial coefficients and cross-checked with scipy's independent `binomtest`.
"""

from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest, norm

from metrics.stats import mcnemar_exact, rate, wilson_interval


@pytest.mark.parametrize("k, n, lo, hi", [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
])  # fmt: skip
def test_wilson_newcombe_1998_table_1(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(k, n)
    assert got == (pytest.approx(lo, abs=5e-5), pytest.approx(hi, abs=5e-5))


def _wilson_by_hand(k: int, n: int, z: float) -> tuple[float, float]:
    """The score interval as the roots of |p - p_hat| = z sqrt(p (1 - p) / n), solved as a quadratic in p."""
    p_hat = k / n
    a = 1 + z * z / n
    b = -(2 * p_hat + z * z / n)
    c = p_hat * p_hat
    disc = math.sqrt(b * b - 4 * a * c)
    return (-b - disc) / (2 * a), (-b + disc) / (2 * a)


# (0, 69): unclamped, float noise puts the lower bound at 3.5e-18 instead of 0.
@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (1, 2), (3, 7), (16, 40), (39, 40), (324, 324), (9, 16),
                                  (0, 69), (0, 125), (68, 69)])
def test_wilson_is_the_score_interval_at_95_percent(k: int, n: int) -> None:
    z = float(norm.ppf(0.975))  # 1.959963984540054; the default 1.959964 moves the bounds by ~1e-9
    lo, hi = _wilson_by_hand(k, n, z)
    got = wilson_interval(k, n)
    assert got == (pytest.approx(max(lo, 0.0), abs=1e-7), pytest.approx(min(hi, 1.0), abs=1e-7))
    # The bounds are exact at the ends of the range, not float noise around them.
    assert (got[0] == 0.0) is (k == 0) and (got[1] == 1.0) is (k == n)
    # Another confidence level through z.
    lo99, hi99 = _wilson_by_hand(k, n, 2.5758293035489)
    assert wilson_interval(k, n, z=2.5758293035489) == (pytest.approx(max(lo99, 0.0), abs=1e-9),
                                                        pytest.approx(min(hi99, 1.0), abs=1e-9))


def test_wilson_domain() -> None:
    assert wilson_interval(0, 0) is None
    for k, n in [(-1, 5), (6, 5)]:
        with pytest.raises(ValueError, match=f"k={k}, n={n}"):
            wilson_interval(k, n)
    assert wilson_interval(5, 5)[1] == 1.0 and wilson_interval(0, 5)[0] == 0.0


def test_rate() -> None:
    assert rate(0, 0) is None and rate(0, 3) == 0.0 and rate(3, 3) == 1.0 and rate(1, 4) == 0.25


@pytest.mark.parametrize("b, c, p", [
    (0, 0, 1.0),                     # no discordant pair: no evidence
    (0, 1, 1.0),                     # 2 * 1/2
    (0, 6, 2 * 1 / 64),              # 0.03125
    (6, 0, 2 * 1 / 64),
    (1, 9, 2 * (1 + 10) / 1024),     # 0.021484375
    (3, 12, 2 * (1 + 15 + 105 + 455) / 32768),  # 0.03515625
    (6, 11, 2 * (1 + 17 + 136 + 680 + 2380 + 6188 + 12376) / 131072),  # 0.33230...
    (4, 5, 1.0),                     # 2 * 256/512 is exactly 1
    (5, 5, 1.0),                     # 2 * 638/1024 > 1: capped
    (16, 0, 2 / 65536),              # the cascade's explicit-only gap on the mini set (p=3.05e-05)
])  # fmt: skip
def test_mcnemar_exact_hand_computed(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue if b + c else 1.0, rel=1e-9)


def test_mcnemar_exact_agrees_with_scipy_on_a_grid() -> None:
    for b in range(0, 25):
        for c in range(0, 25):
            want = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
            assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-9), (b, c)


def test_mcnemar_rejects_negative_counts() -> None:
    for b, c in [(-1, 3), (3, -1)]:
        with pytest.raises(ValueError, match=r"^counts must be >= 0$"):
            mcnemar_exact(b, c)
