"""`duplex-eval push-results RUN... --repo-id ORG/NAME`: scored runs as a Hub results dataset (docs/release.md).

The folder uploaded (and what `--dry-run` writes instead)::

    README.md                      card: YAML front matter a leaderboard reads without this project's code
    results.jsonl                  one row per headline value (config `results`, load_dataset-able)
    runs/<run>/scores.json         the scores as `duplex-eval score` wrote them (and any scores-*.json beside it)
    runs/<run>/parameters.json     run.json, the protocol parameters the episodes ran with, the scoring settings
    runs/<run>/report.md           the tables `duplex-eval score` prints
    runs/<run>/health.json         the run-health measurements, when present
    report/...                     with --report DIR: the HTML report folder `duplex-eval report` wrote

The card's YAML has, under `duplex_eval`, one entry per run: the model (adapter and its arguments), benchmark,
config, dataset (its folder's name or Hub repo and commit, fingerprint), every headline value with n and its confidence
interval, the ASR, judge, thresholds and VAD used, the harness version the episodes recorded, and what the run
covers ("k of n cases", `partial`, how its cases were chosen), which the card's table and every results.jsonl row
repeat. Stale scores (the folder changed after scoring) are refused, as `report` refuses them; a partial run (fewer
episodes than its dataset has cases: `run --limit`, `--sample`, `--case`, or a run not finished) is refused unless
`--allow-partial`, and then marked PARTIAL wherever its numbers appear. Nothing uploaded holds a path of this
machine: a run folder is published as runs/<run>, a dataset as its folder's name (its fingerprint says which data
it was) or the Hub repo and commit it was read from, any other absolute path as its last part.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dataset_builder.atomic import make_temp_dir
from dataset_builder.errors import UsageError
from dataset_builder.hub_source import hub_origin
from metrics.freshness import SCORES, load_json, refuse_if_stale
from metrics.tables import coverage_of

FORMAT = 1
RESULTS_FILE = "results.jsonl"
# Top-level blocks of scores.json whose every value-shaped entry is a headline number: `scores` (every benchmark)
# and M3-DuplexBench's representative values (M3-DuplexBench §4); any other top-level entry with a `value` (DSB-
# IFEval's Entailment Gap, Role Tax, Redundancy Gain) or from a judge (PAS, Safety Override, and each label of the
# Conflict Profile, or the reason they were not computed) is one too.
HEADLINE_BLOCKS = ("scores", "representative")
# The fields of a value kept in the card: the number, its sample sizes and interval, and why it is missing.
VALUE_FIELDS = ("value", "n", "k", "n_a", "n_b", "a", "b", "ci", "interval", "sd", "computed", "reason")
# What the scorer used, copied from scores.json into the card as it is (absent keys left out).
SETTINGS = ("asr", "asr_pad_s", "judge", "thresholds", "overrides", "vad", "rules")


@dataclass(frozen=True)
class ResultFile:
    dest: str  # path in the repo
    data: bytes
    source: str  # where it came from, for the dry run's list


def headline_values(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every headline value of a scores.json: {key (dotted path in scores.json), metric, group, value, n, ci...}."""
    out: list[dict[str, Any]] = []

    def walk(node: Any, path: list[str]) -> None:
        if not isinstance(node, Mapping):
            return
        if _is_value(node):
            entry = {"key": ".".join(path), "metric": path[-1], "group": ".".join(path[1:-1]) or "overall"}
            entry |= {f: node[f] for f in VALUE_FIELDS if f in node}
            entry.setdefault("value", None)
            if "ci" in node and "interval" not in node:
                entry["interval"] = _interval(node)
            out.append(entry)
            return
        for name, child in node.items():
            walk(child, [*path, str(name)])

    for block in HEADLINE_BLOCKS:
        walk(scores.get(block), [block])
    for name, node in scores.items():
        if name not in HEADLINE_BLOCKS and isinstance(node, Mapping) and (_is_value(node) or "computed" in node):
            walk(node, [name])  # a judge's block (DSB-IFEval's conflict profile) holds its values one level down
    return out


def _is_value(node: Mapping[str, Any]) -> bool:
    """A value as `metrics.stats` writes one (its number with its sample size), or one said not computed."""
    return ("value" in node and ("n" in node or "n_a" in node)) or node.get("computed") is False


def _interval(node: Mapping[str, Any]) -> str:
    """The interval `metrics.stats` puts on a value that does not name its own: Wilson for a rate (it has k),
    Newcombe's hybrid score interval for a difference of two rates (n_a, n_b), Student's t for a mean."""
    return "wilson-95" if "k" in node else "newcombe-95" if "n_a" in node else "student-t-95"


def _episode_params(run_dir: Path) -> tuple[list[str], list[Any]]:
    """The harness versions and the distinct protocol parameters the run's episodes recorded (rec.json)."""
    versions: list[str] = []
    protocols: list[Any] = []
    for rec in sorted(run_dir.glob("*.rec.json")):
        try:
            params = json.loads(rec.read_text()).get("params") or {}
        except (OSError, json.JSONDecodeError, AttributeError):
            continue  # the scorer has reported such an episode already; scores.json says how it counted
        if params.get("harness_version") and params["harness_version"] not in versions:
            versions.append(params["harness_version"])
        if "protocol" in params and params["protocol"] not in protocols:
            protocols.append(params["protocol"])
    return versions, protocols


def _dataset_path(scores: Mapping[str, Any], info: Mapping[str, Any]) -> str | None:
    return scores.get("dataset") or (info.get("identity") or {}).get("dataset")


def _dataset(scores: Mapping[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    path = _dataset_path(scores, info)
    origin = hub_origin(path) if path else None
    where = ({"hub": origin["repo_id"], "revision": origin["revision"]} if origin
             else {"name": Path(path).name if path else None})  # the folder's name: its path is this machine's
    return where | {"fingerprint": scores.get("dataset_fingerprint"), "n_cases": scores.get("n_dataset_cases")}


def public_dataset(path: str) -> str:
    """What is published in place of a dataset folder's path: the Hub repo and commit it was read from (a snapshot
    folder of the HF cache), else the folder's name."""
    origin = hub_origin(path)
    return f"{origin['repo_id']}@{origin['revision']}" if origin else Path(path).name


class LocalPaths:
    """The paths of this machine that published files would hold, each with what is published instead: a run
    folder as runs/<run> (the folder the repo keeps it in), a dataset folder as `public_dataset` says, and any
    other absolute path in a JSON value as its last part (an adapter's local weights, say)."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def add(self, path: str | Path, public: str) -> None:
        for form in {str(path), os.path.abspath(path), str(Path(path).resolve())}:
            if form not in (".", "/", ""):
                self.known[form] = public

    def value(self, text: str) -> str:
        """One JSON string: a known path (or a path inside one) published in its place; another absolute path
        as its last part."""
        for local, public in sorted(self.known.items(), key=lambda kv: -len(kv[0])):
            if text == local or text.startswith(local.rstrip("/") + "/"):
                return public + text[len(local.rstrip("/")):]
        return Path(text).name if os.path.isabs(text) else text

    def json(self, node: Any) -> Any:
        if isinstance(node, str):
            return self.value(node)
        if isinstance(node, Mapping):
            return {k: self.json(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self.json(v) for v in node]
        return node

    def text(self, text: str) -> str:
        """Any other text (the HTML report): each known path that names folders (absolute, or relative with a
        '/'), where it stands as a whole path, published in its place."""
        for local, public in sorted(self.known.items(), key=lambda kv: -len(kv[0])):
            if os.path.isabs(local) or "/" in local:
                text = re.sub(rf"(?<![\w./-]){re.escape(local)}(?![\w.-])", lambda _, to=public: to, text)
        return text

    def file(self, dest: str, data: bytes) -> bytes:
        """A copied file's bytes as published: JSON through `json`, other text through `text`, media as it is."""
        suffix = Path(dest).suffix
        if suffix == ".json":
            node = json.loads(data)
            public = self.json(node)
            return data if public == node else (json.dumps(public, indent=2, ensure_ascii=False) + "\n").encode()
        if suffix in (".html", ".md", ".txt", ".js", ".css", ".csv", ".jsonl", ".svg"):
            return self.text(data.decode("utf-8")).encode("utf-8")
        return data


def run_entry(name: str, run_dir: Path, scores: Mapping[str, Any], info: Mapping[str, Any]
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the run's card entry, its parameters.json)."""
    identity = info.get("identity") or {}
    versions, protocols = _episode_params(run_dir)
    adapter_info = scores.get("adapter_info") or {}
    entry: dict[str, Any] = {
        "run": name,
        "model": scores.get("adapter") or identity.get("adapter"),
        "model_args": identity.get("adapter_args") or {},
        "model_version": adapter_info.get("version"),
        "benchmark": scores.get("benchmark"),
        "config": scores.get("config") or info.get("config"),
        "dataset": _dataset(scores, info),
        "n_episodes": scores.get("n_episodes"),
        "n_failed": scores.get("n_failed"),
        "coverage": coverage_of(scores),
        "harness_version": versions[0] if len(versions) == 1 else versions,
        **{k: scores[k] for k in SETTINGS if k in scores},
        "results": headline_values(scores),
    }
    parameters = {"run": dict(info), "protocol": protocols[0] if len(protocols) == 1 else protocols,
                  "scoring": {k: scores[k] for k in SETTINGS if k in scores}, "harness_version": entry[
                      "harness_version"]}
    return entry, parameters


def report_text(name: str, scores: Mapping[str, Any]) -> str:
    """The run's tables, as `duplex-eval score` prints them."""
    from metrics.scoring import result_tables
    from metrics.tables import provenance

    lines = [f"# {name}: {scores.get('adapter')} on {scores.get('benchmark')} ({scores.get('config')})", "",
             f"episodes: {scores.get('n_episodes')}, failed: {scores.get('n_failed')}", ""]
    lines += [f"HEALTH {flag}  " for flag in (scores.get("health") or {}).get("flags", [])]
    for title, text in result_tables({str(scores.get("adapter")): dict(scores)}):
        lines += ["", f"## {title}", "", "```", text, "```"]
    lines += ["", provenance(dict(scores)), ""]
    return "\n".join(lines)


def card(repo_id: str, entries: list[dict[str, Any]], pushed_with: str) -> str:
    """README.md: YAML front matter (the Hub's keys, a `results` config over results.jsonl, and `duplex_eval`
    with every run) and a short body with one table of the headline values."""
    models = sorted({str(e["model"]) for e in entries})
    benches = sorted({str(e["benchmark"]) for e in entries})
    front = {
        "pretty_name": f"duplex-eval results: {', '.join(models)} on {', '.join(benches)}",
        "tags": ["duplex-eval", "evaluation-results", "full-duplex", "spoken-dialogue"],
        "configs": [{"config_name": "results", "data_files": [{"split": "train", "path": RESULTS_FILE}]}],
        "duplex_eval": {"format": FORMAT, "pushed_with": pushed_with, "runs": entries},
    }
    body = [f"# {front['pretty_name']}", "",
            f"Results of duplex-eval runs pushed to {repo_id}, one row per headline value "
            "(`results.jsonl`; the YAML above has each run's settings). Each run's folder under `runs/` holds its "
            "`scores.json`, `parameters.json` and `report.md`.", "",
            "| run | model | benchmark | config | cases | value | group | estimate | n | 95% CI |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    partial = [e["run"] for e in entries if e["coverage"]["partial"]]
    if partial:
        body[4:4] = [f"**Partial runs** ({', '.join(partial)}): their numbers cover only the cases named in the "
                     "`cases` column, not the whole dataset.", ""]
    for e in entries:
        cov = e["coverage"]
        cases = f"{cov['n_cases']} of {cov['n_dataset_cases'] or '?'}" + (" PARTIAL" if cov["partial"] else "")
        for r in e["results"]:
            ci = r.get("ci")
            ci_text = f"[{ci[0]:.4g}, {ci[1]:.4g}]" if isinstance(ci, list) and len(ci) == 2 else ""
            value = r.get("value")
            n = r.get("n", f"{r.get('n_a')}/{r.get('n_b')}" if "n_a" in r else "")
            shown = f"{value:.4g}" if isinstance(value, int | float) else r.get("reason", "")
            body.append(f"| {e['run']} | {e['model']} | {e['benchmark']} | {e['config']} | {cases} | "
                        f"{r['metric']} | {r['group']} | {shown} | {n} | {ci_text} |")
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n" + "\n".join(body) + "\n"


def _report_files(report_dir: Path, local: LocalPaths) -> Iterator[ResultFile]:
    if not (report_dir / "index.html").is_file():
        raise UsageError(f"--report {report_dir}: not a report folder (no index.html); write one with "
                         "`duplex-eval report RUN... --out DIR`")
    local.add(report_dir, "report")
    for p in sorted(report_dir.rglob("*")):
        rel = p.relative_to(report_dir)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            dest = f"report/{rel.as_posix()}"
            yield ResultFile(dest, local.file(dest, p.read_bytes()), str(p))


def refuse_if_partial(run_dir: Path, scores: Mapping[str, Any], allow_partial: bool) -> None:
    """A partial run's numbers published beside whole runs' read as the model's score on the benchmark: refused
    unless the caller says it means it (`--allow-partial`), and then marked wherever they appear."""
    cov = coverage_of(scores)
    if cov["partial"] and not allow_partial:
        how = f" (chosen by {cov['selection']})" if cov["selection"] else ""
        raise UsageError(f"push-results: {run_dir} is a partial run: its scores cover {cov['n_cases']} of "
                         f"{cov['n_dataset_cases']} cases{how}; run the rest into the same folder (the same `run` "
                         "command without --limit/--sample/--case resumes it) and score it again, or pass "
                         "--allow-partial to publish it marked PARTIAL")


def results_files(run_dirs: list[Path], repo_id: str, report_dir: Path | None = None,
                  allow_partial: bool = False) -> list[ResultFile]:
    """Everything the results repo receives. A run without scores.json, with stale scores, a partial run (unless
    `allow_partial`), or two runs of one folder name is one error line naming the run."""
    from eval.orchestrator import HARNESS_VERSION

    if not run_dirs:
        raise UsageError("push-results: name at least one scored run folder")
    files: list[ResultFile] = []
    entries: list[dict[str, Any]] = []
    rows: list[str] = []
    seen: dict[str, Path] = {}
    local = LocalPaths()
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            raise UsageError(f"push-results: run folder {run_dir} does not exist")
        name = run_dir.resolve().name
        if name in seen:
            raise UsageError(f"push-results: {seen[name]} and {run_dir} have the same folder name {name!r}; the "
                             "repo keeps each run under runs/<folder name>: rename one")
        seen[name] = run_dir
        if not (run_dir / SCORES).is_file():
            raise UsageError(f"push-results: {run_dir} has no {SCORES}: score it first (duplex-eval score "
                             f"{run_dir})")
        scores = load_json(run_dir / SCORES, "scores file")
        refuse_if_stale(run_dir, run_dir / SCORES, scores, "its scores would not describe the run pushed")
        refuse_if_partial(run_dir, scores, allow_partial)
        info = load_json(run_dir / "run.json", "run marker") if (run_dir / "run.json").is_file() else {}
        base = f"runs/{name}"
        local.add(run_dir, base)
        if _dataset_path(scores, info):
            local.add(_dataset_path(scores, info), public_dataset(_dataset_path(scores, info)))
        entry, parameters = (local.json(part) for part in run_entry(name, run_dir, scores, info))
        entries.append(entry)
        for p in sorted(run_dir.glob("scores*.json")):
            files.append(ResultFile(f"{base}/{p.name}", local.file(p.name, p.read_bytes()), str(p)))
        if (run_dir / "health.json").is_file():
            files.append(ResultFile(f"{base}/health.json", local.file("health.json", (run_dir / "health.json")
                                                                       .read_bytes()), str(run_dir / "health.json")))
        files.append(ResultFile(f"{base}/parameters.json", (json.dumps(parameters, indent=2) + "\n").encode(),
                                "generated"))
        files.append(ResultFile(f"{base}/report.md", local.text(report_text(name, scores)).encode(), "generated"))
        keep = ("run", "model", "benchmark", "config", "harness_version")
        cov = entry["coverage"]
        for r in entry["results"]:
            ci = r.get("ci") if isinstance(r.get("ci"), list) else [None, None]
            row = {k: entry[k] for k in keep} | {
                "metric": r["metric"], "group": r["group"], "key": r["key"], "value": r.get("value"),
                "n": r.get("n"), "k": r.get("k"), "ci_low": ci[0], "ci_high": ci[1],
                "interval": r.get("interval"), "n_cases": cov["n_cases"], "n_dataset_cases": cov["n_dataset_cases"],
                "partial": cov["partial"]}
            rows.append(json.dumps(row, sort_keys=False))
    if report_dir is not None:
        files += list(_report_files(report_dir, local))
    files.append(ResultFile(RESULTS_FILE, ("\n".join(rows) + "\n").encode(), "generated"))
    files.append(ResultFile("README.md", card(repo_id, entries, HARNESS_VERSION).encode(), "generated"))
    return sorted(files, key=lambda f: f.dest)


def write_folder(files: list[ResultFile], dest: Path) -> Path:
    """Write the files as `dest`, whole or not at all: built beside it, then swapped in for any earlier one."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(dest.parent, f".{dest.name}-")
    try:
        for f in files:
            path = tmp / f.dest
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f.data)
        old = None
        if dest.exists():
            old = make_temp_dir(dest.parent, f".{dest.name}-old-")
            os.replace(dest, old / dest.name)
        os.replace(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def describe(files: list[ResultFile], folder: Path, repo_id: str) -> str:
    width = max(len(f.dest) for f in files)
    lines = [f"dry run: wrote {folder} ({len(files)} files, {sum(len(f.data) for f in files):,} bytes), what "
             f"dataset repo {repo_id} would receive; nothing uploaded:"]
    lines += [f"  {f.dest:<{width}}  {len(f.data):>12,} bytes  <- {f.source}" for f in files]
    return "\n".join(lines)


def push(files: list[ResultFile], repo_id: str, token_env: str = "HF_TOKEN", private: bool = False) -> str:
    """Create the dataset repo if needed and make it hold exactly these files, in one commit (a file of an earlier
    push that is not among them is deleted in the same commit); the commit URL. The token is read from `token_env`
    and given only to `HfApi`: never printed, nor left in an error message."""
    token = os.environ.get(token_env)
    if not token:
        raise RuntimeError(f"push-results: no Hugging Face token: set {token_env} to a write token (or pass "
                           "--dry-run to write the folder that would be uploaded)")
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        keep = {f.dest for f in files} | {".gitattributes"}
        stale = [p for p in api.list_repo_files(repo_id, repo_type="dataset") if p not in keep]
        info = api.create_commit(repo_id, repo_type="dataset", commit_message="Upload results from duplex-eval",
                                 operations=[*(CommitOperationDelete(path_in_repo=p) for p in stale),
                                             *(CommitOperationAdd(path_in_repo=f.dest, path_or_fileobj=f.data)
                                               for f in files)])
    except Exception as err:  # any Hub or network failure becomes one line naming it (the token scrubbed)
        first = (str(err).strip().splitlines() or [""])[0].replace(token, "***")
        raise RuntimeError(f"push-results: could not upload to dataset repo {repo_id}: {type(err).__name__}: "
                           f"{first}") from None
    return str(getattr(info, "commit_url", info))
