"""Reading the M3 text files: YAML whose strings remember their line, and a list of the problems found.

Loading collects every problem of every file before failing, so an author fixes a bank in one pass; each problem
names the file, the line, the entry and the rule (`en/task/relations.yaml:34: city.ask_follow: a follow-up stays
on its entity: no topic-change lead-in: ...`). Warnings are problems that do not stop a build (an unknown key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TEXTS_DIR = Path(__file__).resolve().parent / "texts"


class LineStr(str):
    """A YAML string that knows the line it started on (1-based; 0 when unknown)."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    pass


def _construct_str(loader: _Loader, node: yaml.ScalarNode) -> LineStr:
    s = LineStr(loader.construct_scalar(node))
    s.line = node.start_mark.line + 1
    return s


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def stripped(value: str) -> LineStr:
    """`value.strip()`, keeping the line it came from."""
    out = LineStr(value.strip())
    out.line = line_of(value)
    return out


def line_of(value: object) -> int:
    return value.line if isinstance(value, LineStr) else 0


def rel(path: Path) -> str:
    """A path as problems name it: relative to texts/ when inside it."""
    return str(path.relative_to(TEXTS_DIR)) if path.is_relative_to(TEXTS_DIR) else str(path)


@dataclass(frozen=True)
class Problem:
    where: str  # "file:line: entry"
    rule: str
    text: str
    warning: bool = False

    def __str__(self) -> str:
        head = "warning: " if self.warning else ""
        return f"{self.where}: {head}{self.rule}" + (f": {self.text}" if self.text else "")


@dataclass
class Problems:
    items: list[Problem] = field(default_factory=list)

    def fail(self, where: str, rule: str, text: object = "") -> None:
        self.items.append(Problem(where, rule, _short(text)))

    def warn(self, where: str, rule: str, text: object = "") -> None:
        self.items.append(Problem(where, rule, _short(text), warning=True))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if not p.warning]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if p.warning]


def _short(text: object) -> str:
    s = text if isinstance(text, str) else repr(text)
    return s if len(s) <= 120 else s[:117] + "..."


def where(path: Path, value: object, entry: str) -> str:
    """"file:line: entry", the line taken from `value` when it is a LineStr (else the file alone)."""
    line = line_of(value)
    return f"{rel(path)}:{line}: {entry}" if line else f"{rel(path)}: {entry}"


def read_yaml(path: Path, problems: Problems) -> Any:
    """The file's data (strings as LineStr), or None after recording why it could not be read."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"{rel(path)}:{mark.line + 1}" if mark else rel(path)
        problems.fail(at, "not valid YAML", str(err).splitlines()[0])
    except OSError as err:
        problems.fail(rel(path), "cannot read the file", str(err))
    return None


def check_keys(data: dict, path: Path, entry: str, known: set[str], required: set[str],
               problems: Problems) -> None:
    """Unknown keys are warnings (a bank may carry notes such as `register:`), missing required keys errors."""
    for key in data:
        if key not in known:
            problems.warn(where(path, key, entry), f"unknown key {key!r} (ignored)", str(key))
    for key in sorted(required - set(data)):
        problems.fail(where(path, next(iter(data), ""), entry), f"missing key {key!r}")
