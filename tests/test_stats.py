from __future__ import annotations

import math

import pytest

from metrics.stats import mcnemar_exact, rate, wilson_interval


def test_wilson_known_values() -> None:
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def test_wilson_empty_and_invalid() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_wilson_contains_the_rate() -> None:
    for k, n in [(1, 3), (7, 20), (99, 100)]:
        lo, hi = wilson_interval(k, n)
        assert 0.0 <= lo < k / n < hi <= 1.0


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 6) == pytest.approx(0.03125)
    assert mcnemar_exact(1, 1) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(2, 9) == mcnemar_exact(9, 2)
    # 2 * P(X <= 2 | n=11) = 2 * (1 + 11 + 55) / 2048
    assert mcnemar_exact(2, 9) == pytest.approx(2 * 67 / 2048)


def test_rate() -> None:
    assert rate(0, 0) is None
    assert rate(3, 4) == 0.75
    assert not math.isnan(rate(0, 5))
