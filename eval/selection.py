"""Which cases a run takes: `--case`, `--limit N` (the first N runnable cases) and `--sample N` (a stratified sample
of whole groups), and the line that says what a choice covers.

A benchmark tells the runner how its cases fall into groups and strata (`Benchmark.strata`: case -> (stratum,
group); `Benchmark.sample_unit` names a group: a Duplex-MPE scenario pair, a DSB-IFEval conversation, an
M3-DuplexBench dialogue) and what a case needs of an adapter before its audio is read (`Benchmark.needs`: case ->
capabilities). `--sample` draws whole groups, because each benchmark's scores compare the cases of one group with each
other (explicit against implicit, level against level, condition against condition): a sample of split groups has
no pair to compare. `--limit` and `--sample` count only the cases the adapter can run (docs: "Running a subset"): on
M3-DuplexBench an adapter without teacher forcing spends no slot on a Full-context case it would only record as
skipped.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from dataset_builder.errors import UsageError

C = TypeVar("C")
Strata = Callable[[Any], tuple[Hashable, str]]


def _stratum(value: Hashable) -> tuple[Hashable, ...]:
    return value if isinstance(value, tuple) else (value,)


def _groups(cases: Sequence[Any], strata: Strata | None) -> dict[str, tuple[tuple[Hashable, ...], list[int]]]:
    """group -> (its stratum: its first case's, its case indices in dataset order); without strata each case is
    its own group."""
    out: dict[str, tuple[tuple[Hashable, ...], list[int]]] = {}
    for i, case in enumerate(cases):
        stratum, group = strata(case) if strata else ((), str(i))
        out.setdefault(group, (_stratum(stratum), []))[1].append(i)
    return out


def stratified_sample(cases: Sequence[C], n: int, seed: int, strata: Strata | None) -> list[C]:
    """Whole groups of cases, drawn one at a time until the sample holds at least `n` cases, spread as evenly as
    they can be over each dimension of the groups' strata in turn.

    A stratum is a tuple of values, one per dimension (DSB-IFEval: role, turn-2 mode). Each draw takes the stratum
    with groups left whose first value has been drawn least so far, ties broken by its second value's count and so
    on, then by the stratum's own count, then by a seeded order; within it, a seeded group. So 3 roles get one
    conversation each before any gets a second. The same cases, seed and n give the same sample, returned in
    dataset order. Without strata, a seeded uniform sample of cases.
    """
    if n < 1:
        raise UsageError(f"--sample must be >= 1, got {n}")
    if n >= len(cases):
        return list(cases)
    rng = random.Random(seed)
    by_stratum: dict[tuple[Hashable, ...], list[list[int]]] = defaultdict(list)
    for stratum, members in _groups(cases, strata).values():
        by_stratum[stratum].append(members)
    order = sorted(by_stratum, key=repr)
    rng.shuffle(order)
    rank = {stratum: r for r, stratum in enumerate(order)}
    for pool in by_stratum.values():
        rng.shuffle(pool)
    used_value: dict[tuple[int, Hashable], int] = defaultdict(int)  # (dimension, value) -> groups drawn
    used_stratum: dict[tuple[Hashable, ...], int] = defaultdict(int)
    taken: list[int] = []
    while len(taken) < n:
        stratum = min((s for s in order if by_stratum[s]),
                      key=lambda s: (*(used_value[(d, v)] for d, v in enumerate(s)), used_stratum[s], rank[s]))
        taken += by_stratum[stratum].pop()
        for d, v in enumerate(stratum):
            used_value[(d, v)] += 1
        used_stratum[stratum] += 1
    return [cases[i] for i in sorted(taken)]


def covered(chosen: Sequence[Any], pool: Sequence[Any], strata: Strata | None, unit: str = "case") -> str:
    """What `chosen` (a subset of `pool`) covers, for the line `run` prints: how many whole groups (`unit`s) and
    how many split ones of how many, and each stratum value the choice leaves out ("role R1 only; none of role R2,
    role R3"). Empty without strata."""
    if strata is None or not chosen:
        return ""
    ids = {id(c) for c in chosen}
    groups = _groups(pool, strata)
    whole = split = 0
    for _, members in groups.values():
        k = sum(id(pool[i]) in ids for i in members)
        whole += k == len(members)
        split += 0 < k < len(members)
    parts = [f"{whole} whole {unit}{'' if whole == 1 else 's'} of {len(groups)}"
             + (f" and part of {split} more (a split {unit} has no complete comparison)" if split else "")]
    dims = max((len(s) for s, _ in groups.values()), default=0)
    for d in range(dims):
        every = list(dict.fromkeys(s[d] for s, _ in groups.values() if len(s) > d))
        seen = list(dict.fromkeys(s[d] for s, m in groups.values() if len(s) > d and any(id(pool[i]) in ids
                                                                                          for i in m)))
        if len(seen) < len(every):
            missing = [str(v) for v in every if v not in seen]
            parts.append(f"{', '.join(map(str, seen))} only; none of {', '.join(missing)}")
    return "; ".join(parts)


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
