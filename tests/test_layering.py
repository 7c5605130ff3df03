"""Imports flow one way: dataset_builder -> metrics -> adapters -> eval; nothing imports eval. Within that, no scorer
imports a generator module: a rule both apply lives in dataset_builder/rules/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ["dataset_builder", "metrics", "adapters", "eval"]

# The modules that make a benchmark's data: the build, each benchmark's text, timelines and gold answers, the corpus
# importers and the TTS. A scorer reads a built dataset through its format (DATA_FORMAT) and the rules it shares
# with the builder from dataset_builder/rules/, never through these.
GENERATORS = ("dataset_builder.build", "dataset_builder.mpe", "dataset_builder.ifeval", "dataset_builder.m3",
              "dataset_builder.importers", "dataset_builder.tts")
# What a built dataset is (columns, rows, ids): inside a generator package, but read by scorers too.
DATA_FORMAT = ("dataset_builder.ifeval.schema", "dataset_builder.ifeval.rows", "dataset_builder.m3.schema",
               "dataset_builder.m3.rows")
# The scorers: every module of metrics/ but the build checks, which audit a built dataset and so may read what
# built it (its scripts, text diagnostics and speech).
BUILD_CHECKS = ("metrics/build_audit.py", "metrics/intelligibility.py", "metrics/m3/diagnostics.py")


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(ORDER)


def imported_modules(path: Path) -> set[str]:
    """Every absolute module a file imports, at the top or inside a function (`from a.b import c`: a.b and a.b.c,
    since c may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def is_generator(module: str) -> bool:
    def within(prefixes: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    return within(GENERATORS) and not within(DATA_FORMAT)


def test_no_scorer_imports_a_generator() -> None:
    scorers = [p for p in sorted((ROOT / "metrics").rglob("*.py")) if str(p.relative_to(ROOT)) not in BUILD_CHECKS]
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in scorers for m in sorted(imported_modules(p))
                 if is_generator(m)]
    assert not offenders, "a scorer imports a generator module:\n" + "\n".join(offenders)


def test_shared_rules_import_no_generator() -> None:
    rules = sorted((ROOT / "dataset_builder" / "rules").rglob("*.py"))
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in rules for m in sorted(imported_modules(p))
                 if is_generator(m)]
    assert not offenders, "a shared rule imports a generator module:\n" + "\n".join(offenders)


def test_generator_check_sees_violations(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from dataset_builder.mpe.answers import unit_key\nfrom dataset_builder.m3 import rows\n"
                   "def f():\n    from dataset_builder.m3.timeline import place\n")
    assert sorted(m for m in imported_modules(bad) if is_generator(m)) == [
        "dataset_builder.m3", "dataset_builder.m3.timeline", "dataset_builder.m3.timeline.place",
        "dataset_builder.mpe.answers", "dataset_builder.mpe.answers.unit_key"]


def test_imports_flow_one_way() -> None:
    violations = []
    for rank, package in enumerate(ORDER):
        for path in sorted((ROOT / package).rglob("*.py")):
            for imported in imported_packages(path):
                if ORDER.index(imported) > rank:
                    violations.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not violations, "layering broken:\n" + "\n".join(violations)


def test_nothing_outside_eval_imports_eval() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for pkg in ("dataset_builder", "metrics", "adapters")
        for p in (ROOT / pkg).rglob("*.py")
        if "eval" in imported_packages(p)
    ]
    assert not offenders


def test_layering_check_sees_violations(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from eval.run import run\nimport adapters.oracle\n")
    assert imported_packages(bad) == {"eval", "adapters"}
