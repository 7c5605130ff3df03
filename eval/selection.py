"""Which cases a run takes: `--case`, `--limit N` (the first N runnable cases) and `--sample N` (a stratified sample).

A benchmark tells the runner how its cases fall into strata (`Benchmark.strata`: case -> (stratum, group)) and what
a case needs of an adapter before its audio is read (`Benchmark.needs`: case -> capabilities). `--limit` and
`--sample` count only the cases the adapter can run (docs: "Running a subset"): on M3-DuplexBench an adapter without
teacher forcing spends no slot on a Full-context case it would only record as skipped.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from dataset_builder.errors import UsageError

C = TypeVar("C")
Strata = Callable[[Any], tuple[Hashable, str]]


def stratified_sample(cases: Sequence[C], n: int, seed: int, strata: Strata | None) -> list[C]:
    """`n` cases spread as evenly as they can be over each dimension of the strata in turn, then over the groups
    (e.g. the conversations of DSB-IFEval) within a stratum.

    A stratum is a tuple of values, one per dimension (DSB-IFEval: level, turn-2 mode). Each pick takes the
    stratum with cases left whose first value has been drawn least so far, ties broken by its second value's
    count and so on, then by the stratum's own count, then by a seeded order; within it, the case of the
    least-drawn group (ties: seeded order). So 6 levels get one case each before any gets a second. The same
    cases, seed and n give the same sample, returned in dataset order. Without strata, a seeded uniform sample.
    """
    if n < 1:
        raise UsageError(f"--sample must be >= 1, got {n}")
    if n >= len(cases):
        return list(cases)
    rng = random.Random(seed)
    key = strata or (lambda c: ((), ""))
    by_stratum: dict[tuple[Hashable, ...], list[int]] = defaultdict(list)
    groups: list[str] = []
    for i, case in enumerate(cases):
        stratum, group = key(case)
        by_stratum[stratum if isinstance(stratum, tuple) else (stratum,)].append(i)
        groups.append(group)
    order = sorted(by_stratum, key=repr)
    rng.shuffle(order)
    rank = {stratum: r for r, stratum in enumerate(order)}
    for pool in by_stratum.values():
        rng.shuffle(pool)
    used_value: dict[tuple[int, Hashable], int] = defaultdict(int)  # (dimension, value) -> cases drawn
    used_stratum: dict[tuple[Hashable, ...], int] = defaultdict(int)
    used_group: dict[str, int] = defaultdict(int)
    taken: list[int] = []
    while len(taken) < n:
        stratum = min((s for s in order if by_stratum[s]),
                      key=lambda s: (*(used_value[(d, v)] for d, v in enumerate(s)), used_stratum[s], rank[s]))
        pool = by_stratum[stratum]
        i = pool.pop(min(range(len(pool)), key=lambda j: (used_group[groups[pool[j]]], j)))
        for d, v in enumerate(stratum):
            used_value[(d, v)] += 1
        used_stratum[stratum] += 1
        used_group[groups[i]] += 1
        taken.append(i)
    return [cases[i] for i in sorted(taken)]


def select_cases(cases: Sequence[Any], *, ids: Sequence[str] | None = None, limit: int | None = None,
                 sample: int | None = None, seed: int = 0, strata: Strata | None = None,
                 runnable: Callable[[Any], bool] | None = None, where: str = "") -> tuple[list[Any], int]:
    """The cases to run and how many were left out because the adapter cannot run them (only counted when
    `--limit` or `--sample` asks for a number of cases: a whole run records those cases as skipped instead)."""
    chosen = list(cases)
    if ids:
        known = {c.case_id for c in chosen}
        unknown = sorted(set(ids) - known)
        if unknown:
            raise UsageError(f"--case: no such case id(s) {unknown[:5]} in {where}")
        chosen = [c for c in chosen if c.case_id in set(ids)]
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be >= 1, got {limit}")
    if limit is not None and sample is not None:
        raise UsageError("give --limit N (the first N cases) or --sample N (a stratified sample), not both")
    if limit is None and sample is None:
        return chosen, 0
    n_all = len(chosen)
    if runnable is not None:
        chosen = [c for c in chosen if runnable(c)]
    unrunnable = n_all - len(chosen)
    if sample is not None:
        return stratified_sample(chosen, sample, seed, strata), unrunnable
    return chosen[:limit], unrunnable
