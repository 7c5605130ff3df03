"""The M3 model-channel VAD settings through every path that sets them: the protocol default, a run-wide
`--param` override, what the plan hands the episode (and rec.json records), and what the scorer reads back from
rec.json (or its default when an episode recorded none). The scorer's own IPU rule (gaps > 0.5 s split) then
decides every utterance, whatever the VAD merged."""

from __future__ import annotations

from dataset_builder.benchmark_params import M3Protocol
from eval.plans.m3 import vad_params as plan_vad
from metrics.m3.measure import VAD_M3
from metrics.m3.rules import RULE_SETS, segments
from metrics.m3.score import vad_params as recorded_vad
from metrics.vad import VADParams


def test_protocol_default_is_the_scorers_default() -> None:
    assert plan_vad(M3Protocol()) == VAD_M3 == VADParams(threshold=0.5, neg_threshold=0.35, min_speech_ms=250,
                                                         merge_gap_ms=500, min_silence_ms=0)
    assert recorded_vad({}) == VAD_M3 and recorded_vad(None) == VAD_M3 and recorded_vad("x") == VAD_M3


def test_a_run_wide_override_reaches_the_plan_and_the_scorer() -> None:
    p = M3Protocol().override(["vad_merge_gap_ms=300", "vad_threshold=0.6", "vad_min_speech_ms=100"])
    v = plan_vad(p)
    assert (v.merge_gap_ms, v.threshold, v.min_speech_ms, v.neg_threshold, v.min_silence_ms) == (300, 0.6, 100,
                                                                                              0.35, 0)
    # rec.json records the plan's VAD; the scorer reads it back, ignoring keys it does not know
    assert recorded_vad(v.to_dict()) == v
    assert recorded_vad(v.to_dict() | {"future_key": 1}) == v
    assert recorded_vad({"merge_gap_ms": 200}) == VADParams(merge_gap_ms=200)


def test_the_rules_join_what_a_finer_vad_split() -> None:
    # a VAD merging only gaps < 0.3 s hands over a 0.4 s gap; the paper's IPU rule joins it, a 0.6 s gap not
    spans = [[1.0, 2.0], [2.4, 3.0], [3.6, 4.0]]
    assert segments(spans, RULE_SETS["paper"]) == [(1000, 3000), (3600, 4000)]
