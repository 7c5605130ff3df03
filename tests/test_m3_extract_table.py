"""Known answers for the M3 extractor's front end without the VAD (metrics/m3/extract.py): word timestamps ->
events, the table `duplex-eval events` prints (every event type and note, both user channels, exact text), the
checks on the WAV beside a transcript, and the command's one-line errors. The VAD path is tested with real speech
in tests/test_m3_extract.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from dataset_builder.errors import UsageError
from dataset_builder.rules.m3_events import EventParams
from metrics.m3.extract import _t, events_command, events_from_words, format_events

# user (ch0): TURN [0, 2]; BC [2.6, 3] inside the system's TURN; barge-in [4, 7]; TURN [10, 11], PAUSE, TURN
# [11.6, 12.6]; a BC [13.5, 13.9] in silence. system (ch1): BC [0.5, 0.9]; TURN [2.3, 6] (two words 0.2 s apart);
# TURN [6.8, 9], taking over 0.2 s before the user's barge-in ends.
WORDS = """0\t0.0\t0.8\tso
0\t1.0\t2.0\twhere
1\t0.5\t0.9\tmm
1\t2.3\t3.0\tit's
1\t3.2\t6.0\tdowntown
0\t2.6\t3.0\tok
0\t4.0\t7.0\twait
1\t6.8\t9.0\tsure
0\t10.0\t11.0\tthanks
0\t11.6\t12.6\tbye
0\t13.5\t13.9\toh
"""

HEAD = ("{src}: {dur} s; IPUs from words {words}, split at silences > 0.5 s; BC <= 0.8 s; SHIFT overlap <= 0.4 s, "
        "longer is BARGE_IN")
COLUMNS = "  #  type      by             s         t      t-s  eval         b    tau(L)  note"
USER0 = """ch0 = user: 4 TURN, 2 BC IPUs
ch1 = system: 2 TURN, 1 BC IPUs
{columns}
  1  BC        system     0.500     0.900   +0.400                            inside user TURN [0.000, 2.000]
  2  SHIFT     user       2.000     2.300   +0.300  yes      0.000     0.000  user -> system
  3  BC        user       2.600     3.000   +0.400  yes      2.600     0.000  inside system TURN [2.300, 6.000]
  4  BARGE_IN  user       4.000     7.000   +3.000  yes      4.000     0.000  into system TURN [2.300, 6.000], overlap 2.000 s
  5  SHIFT     user       7.000     6.800   -0.200  yes      4.000     0.000  user -> system, overlap 0.200 s
  6  SHIFT     system     9.000    10.000   +1.000                            system -> user
  7  PAUSE     user      11.000    11.600   +0.600  yes     10.000     0.000  user keeps the turn
  8  BC        user      13.500    13.900   +0.400                            not inside a system TURN
evaluated (caused by the user on ch0): 2 SHIFT, 1 PAUSE, 1 BC, 1 BARGE_IN"""  # noqa: E501
USER1 = """ch0 = system: 4 TURN, 2 BC IPUs
ch1 = user: 2 TURN, 1 BC IPUs
{columns}
  1  BC        user       0.500     0.900   +0.400  yes      0.500     0.000  inside system TURN [0.000, 2.000]
  2  SHIFT     system     2.000     2.300   +0.300                            system -> user
  3  BC        system     2.600     3.000   +0.400                            inside user TURN [2.300, 6.000]
  4  BARGE_IN  system     4.000     7.000   +3.000                            into user TURN [2.300, 6.000], overlap 2.000 s
  5  SHIFT     system     7.000     6.800   -0.200                            system -> user, overlap 0.200 s
  6  SHIFT     user       9.000    10.000   +1.000  yes      6.800     0.000  user -> system
  7  PAUSE     system    11.000    11.600   +0.600                            system keeps the turn
  8  BC        system    13.500    13.900   +0.400                            not inside a user TURN
evaluated (caused by the user on ch1): 1 SHIFT, 0 PAUSE, 1 BC, 0 BARGE_IN"""  # noqa: E501


@pytest.fixture()
def words(tmp_path: Path) -> Path:
    p = tmp_path / "d.txt"
    p.write_text(WORDS, encoding="utf-8")
    return p


def wav(path: Path, seconds: float, channels: int = 2) -> Path:
    sf.write(str(path), np.zeros((int(seconds * 8000), channels), np.float32), 8000)
    return path


def test_the_table_for_either_user_channel(words: Path) -> None:
    d = events_from_words(words)
    assert (d.source, d.duration_s, d.front_end, d.params) == (str(words), 13.9, f"words {words}", EventParams())
    head = HEAD.format(src=words, dur="13.90", words=words)
    assert format_events(d) == head + "\n" + USER0.format(columns=COLUMNS)
    assert format_events(d, 1) == head + "\n" + USER1.format(columns=COLUMNS)
    assert [r.event.start_s for r in d.evaluated()] == [2.0, 2.6, 4.0, 7.0, 11.0]
    assert [r.event.start_s for r in d.evaluated(1)] == [0.5, 9.0]
    assert [i.text for i in d.ipus] == ["so where", "ok", "wait", "thanks", "bye", "oh", "mm", "it's downtown",
                                        "sure"]
    assert len(d.ipus_ch0) == 6 and len(d.ipus_ch1) == 3 and len(d.events) == 8
    assert d.stats().source == str(words)


def test_the_table_names_the_parameters(words: Path) -> None:
    p = EventParams(ipu_gap_s=0.1, bc_max_s=0.5, shift_overlap_max_s=0.3)
    d = events_from_words(words, params=p)
    assert d.params == p
    assert format_events(d).splitlines()[0] == (f"{words}: 13.90 s; IPUs from words {words}, split at silences "
                                               "> 0.1 s; BC <= 0.5 s; SHIFT overlap <= 0.3 s, longer is BARGE_IN")
    # 0.2 s between "so" and "where" now splits; [0, 0.8] is no longer a BC at 0.5 s
    assert [(i.start_s, i.end_s, i.kind) for i in d.ipus_ch0[:2]] == [(0.0, 0.8, "turn"), (1.0, 2.0, "turn")]


def test_a_wav_beside_the_words_sets_source_and_length(words: Path, tmp_path: Path) -> None:
    audio = wav(tmp_path / "d.wav", 14.0)
    d = events_from_words(words, audio)
    assert (d.source, d.duration_s) == (str(audio), 14.0)
    ok = events_from_words(words, wav(tmp_path / "short.wav", 13.4))  # 0.5 s shorter than the words is allowed
    assert ok.duration_s == 13.4
    with pytest.raises(UsageError) as err:
        events_from_words(words, wav(tmp_path / "shorter.wav", 13.375))
    assert str(err.value) == (f"{words}: words run to 13.900 s but {tmp_path / 'shorter.wav'} lasts 13.375 s; "
                              "wrong transcript for this audio?")
    with pytest.raises(UsageError) as err:
        events_from_words(words, wav(tmp_path / "mono.wav", 14.0, channels=1))
    assert str(err.value) == f"{tmp_path / 'mono.wav'}: 1 channel(s); M3 events need a 2-channel dialogue"
    with pytest.raises(UsageError) as err:
        events_from_words(words, tmp_path / "none.wav")
    assert str(err.value) == f"{tmp_path / 'none.wav'}: no such audio file"
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio")
    with pytest.raises(UsageError, match=r"junk\.wav: not a readable audio file \("):
        events_from_words(words, junk)
    with pytest.raises(UsageError) as err:
        events_from_words(tmp_path / "none.txt")
    assert str(err.value) == f"{tmp_path / 'none.txt'}: no such word-timestamp file"
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n", encoding="utf-8")
    assert events_from_words(empty).duration_s == 0.0 and events_from_words(empty).events == ()


def test_events_command_tables_and_stats(words: Path, tmp_path: Path) -> None:
    audio = wav(tmp_path / "d.wav", 14.0)
    text = events_command([audio], words=[words])
    assert text == HEAD.format(src=audio, dur="14.00", words=words) + "\n" + USER0.format(columns=COLUMNS)
    assert events_command([audio], user_channel=1, words=[words]).endswith(USER1.format(columns=COLUMNS)[-60:])
    out = tmp_path / "stats.json"
    table = HEAD.format(src=audio, dur="14.00", words=words) + "\n" + USER0.format(columns=COLUMNS)
    text = events_command([audio, audio], words=[words, words], stats_out=out)
    # two tables with one blank line between them; two dialogues hold too few PAUSEs (one each) and barge-ins
    assert text == (f"{table}\n\n{table}\ntiming stats of 2 dialogue(s) written to {out} (too few events to "
                    "measure pause_s, bc_offset_frac, barge_in_offset_s, barge_in_overlap_s: null there; fill them "
                    "from the shipped defaults with TimingStats.filled_from)")
    saved = json.loads(out.read_text())
    assert saved["source"] == f"2 dialogues: {audio} .. {audio}" and saved["pause_s"] is None
    text = events_command([audio] * 5, words=[words] * 5, stats_out=out)  # five: every field measured
    assert text.endswith(f"{table}\ntiming stats of 5 dialogue(s) written to {out}")
    events_command([audio], words=[words], stats_out=out)
    assert json.loads(out.read_text())["source"] == str(audio)


def test_stats_keep_the_extraction_parameters(words: Path) -> None:
    p = EventParams(ipu_gap_s=0.4)
    assert events_from_words(words, params=p).stats().params == p


def test_times_print_to_the_millisecond_or_a_dash() -> None:
    assert (_t(None), _t(2.0), _t(0.0004), _t(-0.25)) == ("-", "2.000", "0.000", "-0.250")


def test_events_command_without_words_reads_each_wav(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        events_command([tmp_path / "a.wav"])
    assert str(err.value) == f"{tmp_path / 'a.wav'}: no such audio file"


@pytest.mark.parametrize(("kw", "message"), [
    ({"user_channel": 2}, "--user-channel must be 0 or 1, got 2"),
    ({"user_channel": -1}, "--user-channel must be 0 or 1, got -1"),
    ({"words": ["a.txt", "b.txt"]}, "--words given 2 times for 1 dialogues: one per dialogue, in the same order"),
])
def test_events_command_errors(kw: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        events_command([tmp_path / "d.wav"], **kw)
    assert str(err.value) == message
