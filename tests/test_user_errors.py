"""Ordinary mistakes are UsageErrors that say what to do, not tracebacks.

The CLI prints a UsageError or SchemaError as one `error: ...` line; anything else surfaces as a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from adapters.protocol import DuplexAgent
from adapters.registry import adapter_names, load_adapter
from dataset_builder.errors import UsageError
from dataset_builder.tts.base import get_tts, tts_names
from eval.text_reference import get_decider
from metrics.asr import asr_names, get_asr
from metrics.judges import get_judge, judge_names

TINY_AGENT = '''
import numpy as np

from adapters.protocol import Frame


class {cls}:
    name = "tiny"
    version = "1"
    sample_rate = 24_000
    frame_size = 480
    realtime = False
    capabilities = frozenset()

    def __init__(self, gain: float = 0.0) -> None:
        self.gain = gain

    def reset(self, system_prompt, seed):
        pass

    def step(self, user_frame, forced_model_frame=None):
        return Frame(np.full(self.frame_size, self.gain, np.float32))

    def close(self):
        pass
'''


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh current directory, with sys.path and sys.modules restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("usererr_"):
            del sys.modules[name]


# ------------------------------------------------------------------------------------- registry and imports

def test_adapter_module_in_current_directory_loads_without_pythonpath(workdir: Path) -> None:
    (workdir / "usererr_my_model.py").write_text(TINY_AGENT.format(cls="MyModel"))
    agent = load_adapter("usererr_my_model:MyModel", gain=0.25)
    assert isinstance(agent, DuplexAgent) and agent.gain == 0.25
    agent.reset(None, 0)
    frame = agent.step(np.zeros(agent.frame_size, np.float32))
    assert frame.audio.shape == (480,) and np.all(frame.audio == np.float32(0.25))


def test_missing_module_says_where_it_was_looked_for(workdir: Path) -> None:
    path_before = list(sys.path)
    with pytest.raises(UsageError) as err:
        load_adapter("usererr_my_modle:MyModel")
    msg = str(err.value)
    assert "no module named 'usererr_my_modle'" in msg and "--adapter usererr_my_modle:MyModel" in msg
    assert "PYTHONPATH" in msg and "current directory" in msg
    assert sys.path == path_before  # the retry with the current directory leaves no trace when it fails


def test_missing_dependency_of_the_users_module_is_named(workdir: Path) -> None:
    (workdir / "usererr_needs_dep.py").write_text("import usererr_not_installed_dep  # noqa\n")
    with pytest.raises(UsageError) as err:
        load_adapter("usererr_needs_dep:Agent")
    msg = str(err.value)
    assert "'usererr_not_installed_dep'" in msg and "not installed" in msg
    assert "no module named 'usererr_needs_dep'" not in msg  # the user's own module was found


def test_missing_class_lists_what_the_module_defines(workdir: Path) -> None:
    (workdir / "usererr_typo.py").write_text(TINY_AGENT.format(cls="MyModel"))
    with pytest.raises(UsageError) as err:
        load_adapter("usererr_typo:MyModle")
    msg = str(err.value)
    assert "'MyModle'" in msg and "['MyModel']" in msg and "usererr_typo.py" in msg


@pytest.mark.parametrize("target", ["my model:Cls", "usererr_x:", ":Cls", "a:b:c", ".py:Cls", "x.py:my Cls"])
def test_malformed_target_is_a_usage_error(target: str) -> None:
    with pytest.raises(UsageError, match="module:Class"):
        load_adapter(target)


@pytest.mark.parametrize("spelling", ["usererr_forms:Mine", "usererr_forms.Mine", "usererr_forms.py:Mine",
                                      "./usererr_forms.py:Mine"])
def test_three_spellings_of_ones_own_class_load_it(workdir: Path, spelling: str) -> None:
    (workdir / "usererr_forms.py").write_text(TINY_AGENT.format(cls="Mine"))
    agent = load_adapter(spelling, gain=0.5)
    assert isinstance(agent, DuplexAgent) and agent.gain == 0.5


def test_a_file_in_another_folder_imports_its_neighbours(workdir: Path) -> None:
    (workdir / "models").mkdir()
    (workdir / "models" / "usererr_helper.py").write_text("GAIN = 0.75\n")
    (workdir / "models" / "usererr_agent.py").write_text(
        "from usererr_helper import GAIN\n" + TINY_AGENT.format(cls="Mine") + "\nDEFAULT = GAIN\n")
    agent = load_adapter("models/usererr_agent.py:Mine", gain=0.75)
    assert agent.gain == 0.75 and sys.modules["usererr_agent"].DEFAULT == 0.75


def test_file_form_errors_name_the_file_and_the_forms(workdir: Path) -> None:
    with pytest.raises(UsageError) as err:
        load_adapter("./usererr_nofile.py:Mine")
    assert str(err.value).startswith("no file ./usererr_nofile.py (from --adapter ./usererr_nofile.py:Mine); a "
                                     "class of your own is 'file.py:Class'")
    (workdir / "usererr_forms2.py").write_text(TINY_AGENT.format(cls="Mine"))
    with pytest.raises(UsageError, match=r"pass usererr_forms2\.py:ClassName"):
        load_adapter("usererr_forms2.py")
    with pytest.raises(UsageError, match=r"has no 'Mien'; classes it defines: \['Mine'\]"):
        load_adapter("usererr_forms2.Mien")
    # "package.module" is read as "package:module": a module, not a class, and said so with its classes.
    with pytest.raises(UsageError, match=r"'adapters\.silent' .* is a module, not a class: pass "
                                         r"adapters\.silent:ClassName \(classes it defines: \['SilentAgent'\]\)"):
        load_adapter("adapters.silent")


def test_unknown_constructor_argument_names_it_and_the_flag() -> None:
    with pytest.raises(UsageError) as err:
        load_adapter("tests.fake_agents:BrokenAgent", modee="nan")
    msg = str(err.value)
    assert "['modee']" in msg and "--adapter-arg" in msg and "mode" in msg and "at_frame" in msg


def test_missing_required_constructor_argument_is_named(workdir: Path) -> None:
    (workdir / "usererr_needs_ckpt.py").write_text(
        "class Agent:\n    def __init__(self, checkpoint):\n        self.checkpoint = checkpoint\n")
    with pytest.raises(UsageError, match=r"needs \['checkpoint'\].*--adapter-arg"):
        load_adapter("usererr_needs_ckpt:Agent")


def test_type_error_inside_a_constructor_stays_a_traceback(workdir: Path) -> None:
    # Valid arguments, a bug in the class: not the user's mistake, so not dressed up as one.
    (workdir / "usererr_buggy.py").write_text(
        "class Agent:\n    def __init__(self, n: int = 1):\n        self.n = n + 'x'\n")
    with pytest.raises(TypeError):
        load_adapter("usererr_buggy:Agent")


def test_class_that_is_not_an_agent_says_what_it_lacks() -> None:
    with pytest.raises(UsageError, match=r"DuplexAgent.*lacks \[.*'step'"):
        load_adapter("adapters.base:SpeechQueue")


@pytest.mark.parametrize(("load", "names", "kind"), [
    (load_adapter, adapter_names, "adapter"),
    (get_judge, judge_names, "judge"),
    (get_tts, tts_names, "TTS backend"),
    (get_asr, asr_names, "ASR backend"),
    (get_decider, lambda: ["openai", "policy"], "decider"),
])
def test_unknown_name_is_a_usage_error_listing_known_names(load, names, kind: str) -> None:
    with pytest.raises(UsageError) as err:
        load("no-such-thing")
    msg = str(err.value)
    assert f"unknown {kind} 'no-such-thing'" in msg
    assert all(name in msg for name in names())


def test_name_of_a_local_file_hints_at_module_class(workdir: Path) -> None:
    (workdir / "usererr_mine.py").write_text(TINY_AGENT.format(cls="Mine"))
    with pytest.raises(UsageError, match="usererr_mine:ClassName"):
        load_adapter("usererr_mine")


# ----------------------------------------------------------------------------- endpoints without their URL

SECRET = "sk-test-do-not-print-0123456789"


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return SECRET


@pytest.mark.parametrize("kwargs", [{}, {"base_url": "http://127.0.0.1:8000"}, {"model": "qwen"}])
def test_openai_judge_without_endpoint_names_the_flags(kwargs: dict, api_key: str) -> None:
    with pytest.raises(UsageError) as err:
        get_judge("openai", **kwargs)
    msg = str(err.value)
    assert "--judge openai needs --judge-arg base_url=http://HOST:PORT and --judge-arg model=NAME" in msg
    assert "OPENAI_API_KEY" in msg and api_key not in msg


def test_openai_judge_url_without_scheme(api_key: str) -> None:
    with pytest.raises(UsageError, match="base_url must start with http://") as err:
        get_judge("openai", base_url="user:pw@localhost:8000", model="qwen")
    assert "pw" not in str(err.value) and api_key not in str(err.value)


def test_openai_judge_unknown_argument_names_the_flag() -> None:
    with pytest.raises(UsageError, match=r"\['modle'\].*--judge-arg"):
        get_judge("openai", base_url="http://127.0.0.1:8000", modle="qwen")


def test_openai_decider_without_endpoint_names_the_flags(api_key: str) -> None:
    with pytest.raises(UsageError) as err:
        get_decider("openai", cache_dir="x")
    msg = str(err.value)
    assert "--decider openai needs --decider-arg base_url=http://HOST:PORT and --decider-arg model=NAME" in msg
    assert api_key not in msg


def test_policy_decider_rejects_arguments() -> None:
    with pytest.raises(UsageError, match=r"\['model'\].*--decider-arg"):
        get_decider("policy", model="x")


def test_http_tts_without_url_names_the_flag(api_key: str) -> None:
    with pytest.raises(UsageError) as err:
        get_tts("http")
    msg = str(err.value)
    assert "--tts http needs --tts-arg base_url=http://HOST:PORT" in msg and api_key not in msg


def test_http_tts_voices_from_the_command_line() -> None:
    tts = get_tts("http", base_url="http://127.0.0.1:8000", voices="a, b,c")  # --tts-arg voices=a,b,c
    assert tts.voices() == ["a", "b"] and tts.assistant_voice == "c"
    with pytest.raises(UsageError, match="--tts-arg voices"):
        get_tts("http", base_url="http://127.0.0.1:8000", voices="a")
