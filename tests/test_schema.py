"""Records reject bad input with errors that name the file, the row and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.episode import Episode
from dataset_builder.mpe.generator import generate_pair
from dataset_builder.schema import SchemaError, Script
from dataset_builder.tts.piper_backend import HUMAN_VOICES


@pytest.fixture(scope="module")
def script_dict() -> dict:
    return generate_pair(0, 0, list(HUMAN_VOICES))[0].to_dict()


def test_script_round_trips(script_dict: dict) -> None:
    assert Script.from_dict(script_dict).to_dict() == script_dict


@pytest.mark.parametrize(
    "mutate, field, message",
    [
        (lambda d: d["turns"][0].update(label="N9"), "turns[t00].label", "label 'N9'"),
        (lambda d: d.update(colour="red"), None, "unknown key(s) ['colour']"),
        (lambda d: d.pop("gold_answer"), None, "missing key(s) ['gold_answer']"),
        (lambda d: d["turns"][1].update(speaker="Nobody"), "turns[t01].speaker", "not in the scene"),
        (lambda d: d.update(condition="sideways"), "condition", "condition 'sideways'"),
        (lambda d: d.update(seed=2**64), "seed", "int64"),
        (lambda d: d.update(turns=[t for t in d["turns"] if t["label"] != "T"]), "turns", "exactly one T"),
    ],
)
def test_bad_script_names_file_row_field(script_dict: dict, mutate, field: str | None, message: str) -> None:
    broken = json.loads(json.dumps(script_dict))
    mutate(broken)
    with pytest.raises(SchemaError) as err:
        Script.from_dict(broken, source="scripts.jsonl", row=7)
    text = str(err.value)
    assert "file scripts.jsonl" in text and "row 7" in text and message in text
    if field:
        assert err.value.field == field and f"field '{field}'" in text


def test_t_must_not_be_first_or_last(script_dict: dict) -> None:
    d = json.loads(json.dumps(script_dict))
    t = next(i for i, x in enumerate(d["turns"]) if x["label"] == "T")
    d["turns"].append(d["turns"].pop(t))
    with pytest.raises(SchemaError, match="followed by more talk"):
        Script.from_dict(d)


def test_protocol_rejects_typos_and_bad_values() -> None:
    p = MPEProtocol().override(["t_onset_window_s=4", "endpoint_s=2"])
    assert (p.t_onset_window_s, p.endpoint_s, p.response_cap_s) == (4.0, 2.0, 20.0)
    with pytest.raises(SchemaError, match="t_onset_windw_s"):
        MPEProtocol().override(["t_onset_windw_s=4"])
    with pytest.raises(SchemaError, match="bad parameter value"):
        MPEProtocol().override(["endpoint_s=soon"])
    with pytest.raises(SchemaError, match="name=value"):
        MPEProtocol().override(["endpoint_s"])


def test_episode_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.rec.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match="x.rec.json"):
        Episode.load(bad)
    bad.write_text(json.dumps({"case_id": "x"}))
    with pytest.raises(SchemaError, match="not an episode record"):
        Episode.load(bad)


def test_segments_validate_and_render_exact_pauses(piper) -> None:
    from dataset_builder.audio import SESSION_SR
    from dataset_builder.schema import Segment, Turn
    from dataset_builder.segments import render_turn

    turn = Turn("t00", "Ana", "my number is five five five", "N2", segments=[
        Segment("speech", "my number is"), Segment("silence", duration_s=0.75), Segment("speech", "five five five")])
    turn.validate({"Ana"})
    voice = piper.voices()[0]
    audio = render_turn(turn, piper, voice)
    first = piper.synthesize("my number is", voice)
    pause = audio[len(first):len(first) + int(0.75 * SESSION_SR)]
    assert len(pause) == 18_000 and not pause.any()  # exact zero samples, exactly 0.75 s
    assert len(audio) == len(first) + 18_000 + len(piper.synthesize("five five five", voice))
    for bad, field in [
        (Segment("silence", duration_s=0.0), "duration_s"),
        (Segment("speech", ""), "text"),
        (Segment("hum", "x"), "segments[0]"),
    ]:
        with pytest.raises(SchemaError) as err:
            Turn("t01", "Ana", "x", "N3", segments=[bad]).validate({"Ana"})
        assert field in err.value.field
    with pytest.raises(SchemaError, match="spell out"):
        Turn("t02", "Ana", "hello there", "N3", segments=[Segment("speech", "hello")]).validate({"Ana"})
