"""Resolving the spec's ``"module:callable"`` names (the model factory, the loss).

The module next to the spec file is imported first, without leaving it in the module cache;
otherwise an installed package.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from attest.errors import ConfigError

__all__ = ["resolve_callable"]


@contextlib.contextmanager
def _local_import_path(folder: Path, top_name: str) -> Iterator[None]:
    """Import ``top_name`` from ``folder`` without leaving it in the module cache.

    The folder goes first on ``sys.path`` only while importing; any module loaded from the
    folder is then dropped from ``sys.modules`` (the loaded objects stay alive through their
    references) and shadowed entries are restored, so two specs that both ship a ``model.py``
    never see each other's module.
    """
    folder_str = str(folder)
    shadowed = {
        name: mod
        for name, mod in sys.modules.items()
        if name == top_name or name.startswith(top_name + ".")
    }
    for name in shadowed:
        del sys.modules[name]
    sys.path.insert(0, folder_str)
    before = set(sys.modules)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder_str)
        for name in set(sys.modules) - before:
            mod_file = getattr(sys.modules[name], "__file__", None)
            if mod_file and _is_under(Path(mod_file), folder):
                del sys.modules[name]
        sys.modules.update(shadowed)


def _is_under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        return False
    return True


def resolve_callable(
    target: str, spec_dir: Path, *, what: str, spec_path: Path
) -> Callable[..., Any]:
    """``"module:callable"``: the module next to the spec file first, then an installed package."""
    module_name, _, attr_path = target.partition(":")
    top = module_name.split(".")[0]
    local = (spec_dir / f"{top}.py").is_file() or (spec_dir / top / "__init__.py").is_file()
    try:
        if local:
            with _local_import_path(spec_dir, top):
                module = importlib.import_module(module_name)
        else:
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise ConfigError(
                f"{what} {target!r} in {spec_path}: module {module_name!r} is neither next to the "
                f"spec ({spec_dir}) nor an installed package",
                hint=f"put {top}.py beside the spec or install the package",
            ) from None
        raise ConfigError(f"{what} {target!r} in {spec_path}: importing it failed: {exc}") from None
    except Exception as exc:
        raise ConfigError(
            f"{what} {target!r} in {spec_path}: importing module {module_name!r} raised "
            f"{type(exc).__name__}: {exc}",
            hint=f"run python -c 'import {module_name}' for the full error (a package built "
            "for another torch version fails this way)",
        ) from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"{what} {target!r} in {spec_path}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if not callable(obj):
        raise ConfigError(f"{what} {target!r} in {spec_path}: {attr_path!r} is not callable")
    return obj  # type: ignore[no-any-return]
