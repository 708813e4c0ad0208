"""The package layout of docs/architecture.md, held by the code: layers, no circles, and public
names that keep their meaning.

Every ``import`` in the package (module level or inside a function, ``TYPE_CHECKING`` included)
is an arrow. An arrow may only point to a lower layer; modules of one top-level package may
import each other, but never in a circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "attest"

# docs/architecture.md, "Layers". Lower numbers are imported by higher ones, never the reverse.
LAYERS: dict[str, int] = {
    # foundation: the error types and the version, then the helpers every stage shares
    "errors": 0,
    "_version": 0,
    "core": 1,
    "annotations": 1,
    # contracts: the data each stage hands on
    "spec": 2,
    "evidence": 2,
    "certificate": 2,
    "deployment": 2,
    # stages: independent of each other
    "collection": 3,
    "policy": 3,
    "verification": 3,
    "ledger": 3,
    # assembly
    "report": 4,
    "pipeline": 4,
    "integrations": 4,  # framework adapters of the collection stage (Lightning)
    "testing": 4,  # the pytest plugin: collect and the policy engine inside a test
    "archive": 4,  # the audit archive package: build, signed manifest, bounded unpack, verify
    "interop": 4,
    # front: the command line, the demo, the public facade
    "cli": 5,
    "_demo": 5,
    "__main__": 5,
    "": 5,  # attest/__init__.py (lazy re-exports of the public API)
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            for target in targets:
                if target.split(".")[0] == "attest":
                    resolved = _resolve(target, modules)
                    if resolved is not None and resolved != name:
                        graph[name].add(resolved)
    return graph


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_top_level_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _modules()}
    assert units <= set(LAYERS), sorted(units - set(LAYERS))


def test_no_import_points_up_or_sideways_between_stages() -> None:
    wrong = []
    for source, targets in _import_graph().items():
        for target in targets:
            a, b = _unit(source), _unit(target)
            if a == b:
                continue
            if not LAYERS[b] < LAYERS[a] and not (LAYERS[a] == LAYERS[b] == 5):
                wrong.append(f"{source} -> {target} (layer {LAYERS[a]} -> {LAYERS[b]})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_circles() -> None:
    graph = _import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in list(graph):
        if module not in index:
            visit(module)
    assert not circles, circles


def test_no_library_module_imports_the_command_line() -> None:
    users = {
        source
        for source, targets in _import_graph().items()
        if _unit(source) not in ("cli", "__main__") and any(_unit(t) == "cli" for t in targets)
    }
    assert not users, sorted(users)


@pytest.mark.parametrize("limit", [500])
def test_no_file_over_the_limit(limit: int) -> None:
    generated = {"statement_validator.py"}  # written by attest.certificate.schemas
    long = [
        f"{path.relative_to(PACKAGE.parent)}: {count}"
        for path in PACKAGE.rglob("*.py")
        if path.name not in generated
        and (count := path.read_text(encoding="utf-8").count("\n")) > limit
    ]
    assert not long, long


def test_no_function_over_120_lines() -> None:
    long = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "statement_validator.py":  # generated
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 120:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.name}: {length}")
    assert not long, long


PUBLIC = ("collect", "certify", "verify", "evaluate", "integrated_gradients", "TrainingMonitor")


def test_public_names_keep_their_meaning_whatever_is_imported() -> None:
    """``attest.collect`` (and the others) stay functions after every submodule was imported:
    no submodule is named like a public function."""
    code = f"""
import importlib, pkgutil, attest
before = {{name: getattr(attest, name) for name in {PUBLIC!r}}}
for info in pkgutil.walk_packages(attest.__path__, "attest."):
    if info.name != "attest.__main__":
        importlib.import_module(info.name)
for name, value in before.items():
    after = getattr(attest, name)
    assert after is value and callable(after) and not hasattr(after, "__path__"), name
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
