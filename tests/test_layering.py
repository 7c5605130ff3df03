"""Imports flow one way: dataset_builder -> metrics -> adapters -> eval; nothing imports eval."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ["dataset_builder", "metrics", "adapters", "eval"]


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(ORDER)


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
