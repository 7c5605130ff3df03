"""Lazy name registries: "module:Class" strings, imported only when chosen (TTS, ASR, judges, adapters).

Everything a user can get wrong when naming one (an unknown name, a module that is not importable, a class
that is not in it, constructor arguments it does not take) is a UsageError that says what to do, not a
traceback. A module that is not importable is retried once with the current directory on `sys.path`, so
`--adapter my_model:MyModel` finds `./my_model.py` without PYTHONPATH. Three spellings name a class of one's own:
"module:Class", "module.Class" and "path/to/file.py:Class".
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from dataset_builder.errors import UsageError


class LazyRegistry:
    """`option` is the command-line flag that picks an entry ("--adapter") and `arg_option` the one that passes
    its constructor arguments ("--adapter-arg"); both only make error messages say what to type."""

    def __init__(self, kind: str, entries: dict[str, str], option: str | None = None,
                 arg_option: str | None = None) -> None:
        self.kind = kind
        self._entries = dict(entries)
        self.option = option
        self.arg_option = arg_option

    def register(self, name: str, target: str) -> None:
        if not _is_target(target):
            raise ValueError(f"{self.kind} target must be 'module:Class', got {target!r}")
        self._entries[name] = target

    def names(self) -> list[str]:
        return sorted(self._entries)

    def _from(self, name: str) -> str:
        return f"{self.option} {name}" if self.option else f"name {name!r}"

    def target(self, name: str) -> str:
        """The "module:Class" of a registered name; an explicit "module:Class" or "file.py:Class" is its own
        target, and "module.Class" is read as "module:Class"."""
        if ":" in name:
            if not (_is_target(name) or _is_file_target(name)):
                raise UsageError(f"{self.kind} {name!r} is not a registered name nor 'module:Class' "
                                 f"(like my_model:MyModel) nor 'file.py:Class'; known names: {self.names()}")
            return name
        if name in self._entries:
            return self._entries[name]
        module, _, attr = name.rpartition(".")
        if module and attr != "py" and _is_target(f"{module}:{attr}"):
            return f"{module}:{attr}"
        stem = name.removesuffix(".py")
        hint = ""
        if name.endswith(".py") or os.path.isfile(f"{name}.py"):
            hint = f"; for a class in your own file, pass {name}:ClassName" if name.endswith(".py") else \
                f"; for a class in your own module, pass {stem}:ClassName"
        raise UsageError(f"unknown {self.kind} {name!r}; known: {self.names()} (or pass 'module:Class'){hint}")

    def load(self, name: str, **kwargs: Any) -> Any:
        target = self.target(name)
        module_name, _, attr = target.partition(":")
        module = self._import_file(module_name, name) if module_name.endswith(".py") else \
            self._import(module_name, name)
        obj: Any = module
        for part in attr.split("."):
            if not hasattr(obj, part) and isinstance(obj, ModuleType) and _has_submodule(obj, part):
                importlib.import_module(f"{obj.__name__}.{part}")  # "package.module": said so below
            if not hasattr(obj, part):
                raise UsageError(f"{self.kind} {target!r} (from {self._from(name)}): module {module_name!r} "
                                 f"({getattr(module, '__file__', None) or 'built in'}) has no {attr!r}; "
                                 f"classes it defines: {_classes(module)}")
            obj = getattr(obj, part)
        if isinstance(obj, ModuleType):  # "package.module" read as "package:module"
            raise UsageError(f"{self.kind} {name!r} (from {self._from(name)}) is a module, not a class: pass "
                             f"{obj.__name__}:ClassName (classes it defines: {_classes(obj)})")
        if not callable(obj):
            raise UsageError(f"{self.kind} {target!r} (from {self._from(name)}) is a "
                             f"{type(obj).__name__}, not a class")
        self._check_arguments(obj, target, name, kwargs)
        return obj(**kwargs)

    def _import(self, module_name: str, name: str) -> ModuleType:
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if not _is_itself(err, module_name):
                raise self._dependency_error(err, module_name, name) from None
        cwd = os.getcwd()
        if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
            # Only now, and at the end: an installed package keeps precedence over a same-named local file.
            sys.path.append(cwd)
            importlib.invalidate_caches()
            try:
                return importlib.import_module(module_name)
            except BaseException as err:
                sys.path.remove(cwd)
                if not isinstance(err, ModuleNotFoundError):
                    raise
                if not _is_itself(err, module_name):
                    raise self._dependency_error(err, module_name, name) from None
        raise UsageError(f"no module named {module_name!r} (from {self._from(name)}); is it on PYTHONPATH or "
                         f"in the current directory ({cwd})?")

    def _import_file(self, path: str, name: str) -> ModuleType:
        """A module from its file ("path/to/my_model.py"), its folder put on `sys.path` for its own imports."""
        file = Path(path)
        if not file.is_file():
            raise UsageError(f"no file {path} (from {self._from(name)}); a class of your own is 'file.py:Class' "
                             f"(a path from {os.getcwd()}) or 'module:Class'")
        folder = str(file.resolve().parent)
        if folder not in sys.path:
            sys.path.append(folder)
        spec = importlib.util.spec_from_file_location(file.stem, file)
        if spec is None or spec.loader is None:
            raise UsageError(f"{path} (from {self._from(name)}) cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[file.stem] = module
        try:
            spec.loader.exec_module(module)
        except ModuleNotFoundError as err:
            del sys.modules[file.stem]
            raise self._dependency_error(err, file.stem, name) from None
        return module

    def _dependency_error(self, err: ModuleNotFoundError, module_name: str, name: str) -> UsageError:
        what = f"imports {err.name!r}, which is not installed" if err.name else f"failed to import: {err}"
        return UsageError(f"{self.kind} module {module_name!r} (from {self._from(name)}) was found, but it {what}; "
                          "install the package that provides it")

    def _check_arguments(self, cls: Any, target: str, name: str, kwargs: dict[str, Any]) -> None:
        """Unknown or missing constructor arguments, said by name before the call (a TypeError raised inside
        the constructor itself is a bug in it and stays a traceback)."""
        try:
            params = inspect.signature(cls).parameters.values()
        except (TypeError, ValueError):  # no signature to read (some built-ins): let the call decide
            return
        if any(p.kind is p.VAR_KEYWORD for p in params):
            accepted = None
        else:
            accepted = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        unknown = [] if accepted is None else sorted(set(kwargs) - set(accepted))
        missing = [p.name for p in params if p.default is p.empty and p.name not in kwargs
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not unknown and not missing:
            return
        what = []
        if unknown:
            what.append(f"does not take {unknown}" + (f" (check the {self.arg_option} names)"
                                                      if self.arg_option else ""))
        if missing:
            what.append(f"needs {missing}" + (f" (pass {self.arg_option} NAME=VALUE)" if self.arg_option else ""))
        takes = "any keyword" if accepted is None else (accepted or "none")
        shown = f"{name!r}" if name == target else f"{name!r} ({target})"
        raise UsageError(f"{self.kind} {shown} {' and '.join(what)}; it takes: {takes}")


def _is_target(target: str) -> bool:
    module, sep, attr = target.partition(":")
    return bool(sep) and all(p.isidentifier() for p in module.split(".")) \
        and all(p.isidentifier() for p in attr.split("."))


def _is_file_target(target: str) -> bool:
    """"path/to/file.py:Class"."""
    path, sep, attr = target.rpartition(":")
    return bool(sep) and path.endswith(".py") and len(path) > 3 and all(p.isidentifier() for p in attr.split("."))


def _has_submodule(module: ModuleType, name: str) -> bool:
    try:
        return hasattr(module, "__path__") and importlib.util.find_spec(f"{module.__name__}.{name}") is not None
    except (ImportError, ValueError):
        return False


def _is_itself(err: ModuleNotFoundError, module_name: str) -> bool:
    """Whether the missing module is the one asked for (or a package above it), not one it imports."""
    return err.name is not None and (module_name == err.name or module_name.startswith(err.name + "."))


def _classes(module: ModuleType) -> list[str]:
    return sorted(n for n, v in vars(module).items()
                  if isinstance(v, type) and v.__module__ == module.__name__ and not n.startswith("_"))
