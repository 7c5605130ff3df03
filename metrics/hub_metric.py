"""What a Hugging Face metric Space receives for one `evaluate` module under metrics/evaluate_modules/<name>/
(`duplex-eval push-metric NAME --space ORG/SPACE [--dry-run]`), and the upload itself.

A metric Space is the module's script named after the Space (`evaluate.load("ORG/SPACE")` fetches `SPACE.py`),
its card as README.md under the Space's YAML header, the standard `evaluate.utils.launch_gradio_widget` app.py and
a requirements.txt. The script imports its scoring code from `metrics.*`, so the Space must have it: by default
the pure-Python files the script reaches through its imports (found by parsing them, lazy imports included) are
copied into the Space beside app.py, where the app imports them from its own folder; with `package` given, that
requirement (e.g. `duplex-eval @ git+https://...@COMMIT`) is declared instead and nothing is copied. Every
third-party package the uploaded code imports is pinned to the version installed here, the one it was tested
with; an import no installed distribution provides is an error, not a Space that fails on start.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from dataset_builder.errors import UsageError
from metrics import EVALUATE_MODULES, metric_names

ROOT = Path(__file__).resolve().parent.parent  # the folder holding the project's packages
PROJECT = ("dataset_builder", "metrics", "adapters", "eval")
# The base every metric script subclasses (its module info and input column): what it imports, the script imports.
SCRIPT_BASE = EVALUATE_MODULES / "base.py"
DISTRIBUTION = "duplex-eval"
# evaluate's launch_gradio_widget builds its form with gr.inputs / gr.outputs, which gradio 4 removed: the SDK
# version evaluate's own metric Spaces declare. The package needs Python >= 3.11.
SPACE_HEADER = {"emoji": "🎙️", "colorFrom": "indigo", "colorTo": "green", "sdk": "gradio", "sdk_version": "3.19.1",
                "python_version": "3.11", "app_file": "app.py", "pinned": False}
SPACE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_-]{0,95}$")
FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)
APP = '''import evaluate
from evaluate.utils import launch_gradio_widget


module = evaluate.load("{space}")
launch_gradio_widget(module)
'''


@dataclass(frozen=True)
class SpaceFile:
    dest: str  # path in the Space repository
    data: bytes
    source: str  # where it comes from: a path relative to ROOT, with how it was changed, or "generated"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def module_folder(name: str) -> Path:
    folder = EVALUATE_MODULES / name
    if not (folder / f"{name}.py").is_file():
        raise UsageError(f"push-metric: no metric module {name!r}; known: {', '.join(metric_names())}")
    return folder


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (a `from a import b` names `a` and, if it is one, `a.b`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise UsageError(f"push-metric: {path.relative_to(ROOT)} uses a relative import; the Space copy "
                             "resolves absolute imports only")
    return names


def project_closure(script: Path) -> tuple[list[Path], set[str]]:
    """(the project files `script` reaches through its imports, parent packages' __init__.py included, sorted;
    the top-level names of every other module they import)."""
    files: set[Path] = set()
    others: set[str] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        for module in _imported_modules(path):
            top = module.split(".")[0]
            if top not in PROJECT:
                others.add(top)
                continue
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                found = _module_file(".".join(parts[:i]))
                if found is not None and found not in files:
                    files.add(found)
                    todo.append(found)
    files.discard(script)
    return sorted(files), others


def pinned_requirements(top_names: set[str]) -> list[str]:
    """`distribution==version` for every non-standard-library top-level import, as installed here."""
    providers = importlib.metadata.packages_distributions()
    pins: set[str] = set()
    for top in sorted(top_names - set(sys.stdlib_module_names) - {"__future__"}):
        dists = sorted(set(providers.get(top, [])) - {DISTRIBUTION})
        if not dists:
            raise UsageError(f"push-metric: no installed distribution provides {top!r}, which the metric imports; "
                             "install it here first so its version can be pinned")
        pins.update(f"{d}=={importlib.metadata.version(d)}" for d in dists)
    return sorted(pins, key=str.lower)


def space_readme(card: str, name: str, space_id: str) -> str:
    """The card under the Space's YAML header (the card's own title, tags and description kept), with how to load
    the module from the Hub put first."""
    match = FRONT_MATTER.match(card)
    if match is None:
        raise UsageError(f"push-metric: metrics/evaluate_modules/{name}/README.md has no YAML front matter")
    meta = yaml.safe_load(match.group(1)) or {}
    header = {"title": meta.pop("title", name), **SPACE_HEADER, **meta}
    body = card[match.end():]
    load = (f"\n## Load it from the Hub\n\n```python\nimport evaluate\n\n"
            f"metric = evaluate.load(\"{space_id}\")\n```\n\n"
            f"The script imports its scoring code from the `{DISTRIBUTION}` package (`metrics.*`): install it where "
            "you load the module. Locally, `evaluate.load(metric_dir(...))` below needs no Hub at all.\n")
    h1 = re.search(r"^# .*\n", body, re.M)
    title_end = h1.end() if h1 else 0
    front = yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=110)
    return f"---\n{front}---\n{body[:title_end]}{load}{body[title_end:]}"


def space_files(name: str, space_id: str, package: str | None = None) -> list[SpaceFile]:
    """Every file the Space receives, in upload order: script, README.md, app.py, requirements.txt, then the
    project code it imports (unless `package` is declared instead)."""
    if not SPACE_ID.match(space_id):
        raise UsageError(f"push-metric: --space {space_id!r}: expected ORG/NAME (letters, digits, '_' and '-'; the "
                         "Space's script is NAME.py)")
    if package is not None and not package.strip():
        raise UsageError("push-metric: --package is empty; give a pip requirement such as "
                         f"'{DISTRIBUTION} @ git+https://github.com/ORG/duplex-eval@COMMIT'")
    folder = module_folder(name)
    script = folder / f"{name}.py"
    space_name = space_id.split("/", 1)[1]
    closure, others = project_closure(script)
    if package:
        vendored: list[Path] = []
        own = [script] + [p for p in closure if p == SCRIPT_BASE]
        pins = pinned_requirements({m.split(".")[0] for f in own for m in _imported_modules(f)} - set(PROJECT))
        reqs = (f"# the scoring code this metric imports (metrics.*) comes from the {DISTRIBUTION} package:\n"
                f"{package.strip()}\n# imported by the metric script, pinned to the versions it was tested with:\n")
    else:
        vendored, pins = closure, pinned_requirements(others)
        tops = ", ".join(sorted({p.relative_to(ROOT).parts[0] + "/" for p in vendored}))
        reqs = (f"# {DISTRIBUTION} {importlib.metadata.version(DISTRIBUTION)}'s scoring code for this metric is copied "
                f"into this Space\n# ({len(vendored)} pure-Python files under {tops}); the script and that code import "
                "these,\n# pinned to the versions they were tested with:\n")
    reqs += "".join(f"{pin}\n" for pin in pins)
    card = (folder / "README.md").read_text()
    files = [
        SpaceFile(f"{space_name}.py", script.read_bytes(), str(script.relative_to(ROOT))),
        SpaceFile("README.md", space_readme(card, name, space_id).encode(),
                  f"metrics/evaluate_modules/{name}/README.md under the Space's YAML header"),
        SpaceFile("app.py", APP.format(space=space_id).encode(), "generated"),
        SpaceFile("requirements.txt", reqs.encode(), "generated"),
    ]
    extra = sorted(p for p in folder.iterdir() if p.is_file() and p.name not in (script.name, "README.md")
                   and p.suffix != ".pyc")
    files += [SpaceFile(p.name, p.read_bytes(), str(p.relative_to(ROOT))) for p in extra]
    files += [SpaceFile(str(p.relative_to(ROOT)), p.read_bytes(), f"{p.relative_to(ROOT)} (copied)")
              for p in vendored]
    return files


def describe(files: list[SpaceFile], space_id: str) -> str:
    """The dry run: every file with its destination and source, then the text of each file this command writes
    or changes (the others are byte copies of this checkout, named with their sha256)."""
    width = max(len(f.dest) for f in files)
    lines = [f"Space {space_id} (https://huggingface.co/spaces/{space_id}) would receive {len(files)} files:"]
    lines += [f"  {f.dest:<{width}}  <- {f.source}  ({len(f.data):,} bytes, sha256 {f.sha256[:12]})" for f in files]
    for f in files:
        if f.source == "generated" or f.dest == "README.md":
            lines += ["", f"===== {f.dest} =====", f.data.decode().rstrip("\n")]
    return "\n".join(lines)


def push(files: list[SpaceFile], space_id: str, token_env: str = "HF_TOKEN", private: bool = False) -> str:
    """Create the Space if needed and upload the files in one commit; the commit URL. The token is read from
    `token_env` and given only to `HfApi`: it is never printed, nor left in an error message."""
    token = os.environ.get(token_env)
    if not token:
        raise RuntimeError(f"push-metric: no Hugging Face token: set {token_env} to a write token (or pass "
                           "--dry-run to see what would be uploaded)")
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(space_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
        info = api.create_commit(space_id, repo_type="space", commit_message="Upload metric from duplex-eval",
                                 operations=[CommitOperationAdd(path_in_repo=f.dest, path_or_fileobj=f.data)
                                             for f in files])
    except Exception as err:  # any Hub or network failure becomes one line naming it (the token scrubbed)
        first = (str(err).strip().splitlines() or [""])[0].replace(token, "***")
        raise RuntimeError(f"push-metric: could not upload to Space {space_id}: {type(err).__name__}: "
                           f"{first}") from None
    return str(getattr(info, "commit_url", info))
