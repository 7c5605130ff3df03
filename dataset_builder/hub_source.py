"""A `--dataset` (or `build --diagnostics-only --out`) value that names a Hub dataset repo, read from the HF cache.

How a value is read (docs/release.md, "Reading a set from the Hub"):

- `hf://datasets/ORG/NAME[@REV]` is always the Hub.
- Any other value naming a path that exists (a folder, or a file) is that local path: a local folder wins over
  the Hub repo of the same name.
- `ORG/NAME` or `ORG/NAME@REV` (exactly one slash, no leading `.`, `/` or `~`, no trailing slash) that names no
  local path is the Hub dataset repo ORG/NAME at revision REV (a branch, tag or commit; default `main`).
- Anything else (`./data/x`, `/abs/x`, `a/b/c`) is a local path, missing or not.

A Hub repo is fetched with `huggingface_hub.snapshot_download` into the HF cache (`HF_HUB_CACHE`, `HF_HOME`;
`HF_TOKEN` for a private repo) and read from its snapshot folder there; with a cached snapshot it works offline
(`HF_HUB_OFFLINE=1`, or when the Hub cannot be reached). Anything that stops it is one line saying what.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from dataset_builder.errors import UsageError

log = logging.getLogger("duplex_eval.hub")

HUB_PREFIX = "hf://datasets/"
# The Hub's repo id: namespace and name of letters, digits, '-', '_' and '.', not starting with '-' or '.'.
_REPO_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*")
# A snapshot folder of a dataset repo in the HF cache: .../datasets--ORG--NAME/snapshots/<commit>.
_SNAPSHOT = re.compile(r"datasets--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<sha>[0-9a-f]{40})/?$")


@dataclass(frozen=True)
class HubDataset:
    repo_id: str
    revision: str | None  # None: the default branch

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def hub_reference(spec: str) -> HubDataset | None:
    """The Hub dataset repo a `--dataset` value names, or None when it names a local path (rules above)."""
    forced = spec.startswith(HUB_PREFIX)
    if not forced and (Path(spec).expanduser().exists() or spec.startswith(("/", ".", "~"))):
        return None
    body = spec[len(HUB_PREFIX):] if forced else spec
    repo, sep, revision = body.partition("@")
    if _REPO_ID.fullmatch(repo) and (revision or not sep):
        return HubDataset(repo, revision or None)
    if forced:
        raise UsageError(f"{spec}: not a Hub dataset repo id; write {HUB_PREFIX}ORG/NAME or {HUB_PREFIX}ORG/NAME@REV")
    return None


def hub_origin(folder: Path | str) -> dict[str, str] | None:
    """{"repo_id", "revision"} of a snapshot folder of the HF cache (a run's dataset read from the Hub), else None."""
    m = _SNAPSHOT.search(Path(folder).as_posix())
    return None if m is None else {"repo_id": f"{m['org']}/{m['name']}", "revision": m["sha"]}


def dataset_folder(spec: str, *, local_only: bool = False) -> str:
    """The local folder a `--dataset` value names: the value itself for a local path, else the snapshot folder of
    the Hub repo in the HF cache (downloaded, or found there offline). `local_only`: the cache only, never the
    network (a process started by one that already downloaded it)."""
    ref = hub_reference(spec)
    if ref is None:
        return spec
    return download(ref, spec, local_only=local_only)


def download(ref: HubDataset, spec: str, *, local_only: bool = False) -> str:
    """`snapshot_download` of the dataset repo into the HF cache; its snapshot folder. Every way it can fail is
    one line naming the repo, what went wrong and what to do."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    local = "" if spec.startswith(HUB_PREFIX) else (
        f" (no local folder {spec} exists; write ./{spec} for a local path)")
    where = f"Hub dataset repo {ref}{local}"
    offline = local_only or constants.HF_HUB_OFFLINE
    try:
        folder = snapshot_download(ref.repo_id, repo_type="dataset", revision=ref.revision,
                                   local_files_only=local_only)
    except RevisionNotFoundError:
        raise UsageError(f"{where}: it has no revision {ref.revision!r} (a branch, tag or commit)") from None
    except GatedRepoError:
        raise UsageError(f"{where}: it is gated; accept its terms on the Hub and set HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise UsageError(f"{where}: not found on the Hub {constants.ENDPOINT} (private? set HF_TOKEN to a token "
                         "that can read it)") from None
    except IncompleteSnapshotError:
        raise UsageError(f"{where}: the Hub cannot be reached and the cached copy under {constants.HF_HUB_CACHE} "
                         "is incomplete; download it again online") from None
    except LocalEntryNotFoundError:
        why = ("this process reads the HF cache only (the process that launched it downloads the set)" if local_only
               else "offline (HF_HUB_OFFLINE is set)" if offline
               else f"the Hub {constants.ENDPOINT} cannot be reached")
        # huggingface_hub's command line is `hf` (its entry point; it ships no huggingface-cli any more).
        fetch = f"hf download {ref.repo_id} --repo-type dataset" + (f" --revision {ref.revision}" if ref.revision
                                                                   else "")
        raise UsageError(f"{where}: {why} and no copy is cached under {constants.HF_HUB_CACHE}; run it once "
                         f"online (or fetch it with `{fetch}`) first") from None
    except HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", "?")
        first = (str(err).strip().splitlines() or [""])[0]
        raise UsageError(f"{where}: the Hub answered HTTP {status}: {first}") from None
    except OSError as err:  # the cache folder cannot be written, the disk is full, ...
        raise UsageError(f"{where}: cannot download it into {constants.HF_HUB_CACHE}: {err}") from None
    origin = hub_origin(folder)
    log.info("dataset %s: Hub commit %s, read from %s", ref, origin["revision"][:12] if origin else "?", folder)
    return folder


def local_view(snapshot: Path | str, dest: Path | str) -> Path:
    """A folder of links to a snapshot's files, for a command that writes beside what it reads (`build
    --diagnostics-only` writes diagnostics.json), so the HF cache itself is never written to. Re-made each call."""
    snapshot, dest = Path(snapshot), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for src in sorted(snapshot.rglob("*")):
        if src.is_dir():
            continue
        link = dest / src.relative_to(snapshot)
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(src.resolve(), link)
    return dest
