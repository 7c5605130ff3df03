"""Small statistics for reported numbers: Wilson score intervals for rates, Student-t intervals for means, and the
exact McNemar test (docs/benchmarks/mpe.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def rate(k: int, n: int) -> float | None:
    """k/n, or None when there is no denominator (never a silent 0)."""
    return None if n == 0 else k / n


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion (95 % by default); None when n == 0."""
    if n == 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Clamp float noise: at k == 0 the lower bound is exactly 0, at k == n the upper exactly 1.
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of b vs c discordant pairs at p = 0.5."""
    if b < 0 or c < 0:
        raise ValueError("counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def summarise(successes: Iterable[bool]) -> dict[str, Any]:
    """A rate with its count and 95 % Wilson interval: {"value", "n", "k", "ci"} (value and ci None for n = 0)."""
    oks = list(successes)
    n, k = len(oks), sum(oks)
    ci = wilson_interval(k, n) if n else None
    return {"value": k / n if n else None, "n": n, "k": k, "ci": [round(ci[0], 4), round(ci[1], 4)] if ci else None}


def t_interval(values: Iterable[float], level: float = 0.95) -> dict[str, Any]:
    """A mean with its count, sample SD and Student-t interval: {"value", "n", "sd", "ci"} (value None for n = 0;
    sd and ci None for n < 2, where no spread can be estimated)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return {"value": None, "n": 0, "sd": None, "ci": None}
    mean = math.fsum(xs) / n
    if n < 2:
        return {"value": mean, "n": 1, "sd": None, "ci": None}
    from scipy.stats import t as student_t

    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(student_t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return {"value": mean, "n": n, "sd": sd, "ci": [mean - half, mean + half]}
