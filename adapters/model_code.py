"""Importing a model's own code (its research repository, not a package on PyPI) inside an adapter's loader."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dataset_builder.errors import UsageError


@contextmanager
def model_code(adapter: str, code_dir: str | Path | None, code: str, where: str) -> Iterator[None]:
    """The imports of a model's code go inside `with`: `code_dir` (the checkout's folder that holds its modules,
    when the user passed one) is put first on sys.path, and a module that is not there is one line,
    `{adapter} needs {code} (the import error): {where}`, instead of a traceback."""
    if code_dir:
        path = str(code_dir)
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        yield
    except ImportError as err:
        raise UsageError(f"{adapter} needs {code} ({err}): {where}") from None
