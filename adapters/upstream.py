"""What an adapter was written against, and what a run actually loaded.

No machine of this project can load a real model, so each adapter is held against its upstream code at one pinned
revision: a git commit of the model's own repository, a Hugging Face revision of its weights and remote code, or a
PyPI release. An adapter declares its pins (`Pin`); when it loads, it compares each with what it found and keeps
the result (`provenance`), which its `runtime()` hands to every rec.json. A load from another revision is not an
error (a newer checkout may work), but it is said in one line on stderr and recorded, so a result says which code
produced it (docs/models.md lists each adapter's pins and the entry points read at them).
"""

from __future__ import annotations

import logging
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("duplex_eval.upstream")

KINDS = ("git", "hf", "pypi")
_HEX = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Pin:
    """One upstream an adapter follows: `kind` "git" (`repo` owner/name, `ref` a commit), "hf" (`repo` a model id,
    `ref` the revision: a commit of the model repo) or "pypi" (`repo` the distribution, `ref` its version)."""

    kind: str
    repo: str
    ref: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"pin kind {self.kind!r} not in {KINDS}")
        if self.kind in ("git", "hf") and not _HEX.fullmatch(self.ref):
            raise ValueError(f"{self.kind} pin of {self.repo} needs a commit hash, not {self.ref!r}")

    def label(self) -> str:
        return f"{self.repo}@{self.ref[:8] if self.kind != 'pypi' else self.ref}"


def same_ref(pinned: str, used: str | None) -> bool:
    """A commit written short matches the same commit written long; versions compare whole."""
    if not used:
        return False
    if _HEX.fullmatch(pinned) and _HEX.fullmatch(used):
        return pinned.startswith(used) or used.startswith(pinned)
    return pinned == used


def git_head(repo_dir: str | Path) -> str | None:
    """The commit checked out in `repo_dir` (or a folder inside it), or None where it is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(repo_dir), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    head = out.stdout.strip()
    return head if out.returncode == 0 and _HEX.fullmatch(head) else None


def hf_snapshot_revision(folder: str | Path) -> str | None:
    """The revision of a Hugging Face cache snapshot folder (`.../snapshots/<commit>/`), None for any other folder:
    a plain local copy of a model does not say which revision it is."""
    path = Path(folder).resolve()
    for part in (path, *path.parents):
        if part.parent.name == "snapshots" and _HEX.fullmatch(part.name):
            return part.name
    return None


def provenance(adapter: str, pin: Pin, used: str | None, what: str = "") -> dict[str, Any]:
    """The record of one pin for rec.json: `{"repo", "kind", "pinned", "used", "matches"}`; when `used` is not the
    pinned revision (or is unknown), one line on the log says so."""
    matches = same_ref(pin.ref, used)
    if not matches:
        found = f"at {used}" if used else "at a revision it cannot tell"
        log.warning("%s: %s is %s; this adapter was written against %s, so its calls may not fit "
                    "(docs/models.md lists what was checked there)", adapter, what or pin.repo, found, pin.label())
    return {"repo": pin.repo, "kind": pin.kind, "pinned": pin.ref, "used": used, "matches": matches}
