"""Everything ``attest ledger serve`` imports is installed by the ``ledger-service`` extra (issue 33,
item 11): a static walk of the imports (fast), the error naming the package a missing module
comes from, and (slow) a fresh virtual environment built from the extra alone."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from attest.cli.ledger_service import SERVICE_PACKAGES, missing_module
from attest.errors import InputError

ROOT = Path(__file__).resolve().parents[4]
SERVICE = ROOT / "attest" / "ledger" / "service"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _canonical(match.group(1))


def declared() -> tuple[set[str], set[str]]:
    """(core dependencies, ledger-service extra) as canonical distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extra = {_requirement_name(r) for r in project["optional-dependencies"]["ledger-service"]}
    return core, extra


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by ``path`` (at module level or in functions), skipping
    ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _source(module: str) -> Path | None:
    parts = module.split(".")
    for candidate in (
        ROOT.joinpath(*parts).with_suffix(".py"),
        ROOT.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def third_party_imports() -> dict[str, set[str]]:
    """Top-level third-party module -> the attest modules importing it, following attest's own
    imports from every module of attest/ledger/service (and ``attest ledger serve``'s CLI)."""
    todo = [*sorted(SERVICE.glob("*.py")), ROOT / "attest" / "cli" / "ledger_service.py"]
    seen: set[Path] = set()
    out: dict[str, set[str]] = {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imports(path):
            top = module.partition(".")[0]
            if top == "attest":
                source = _source(module)
                if source is not None:
                    todo.append(source)
                    todo.extend(p for p in (source.parent / "__init__.py",) if p.is_file())
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                out.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return out


def undeclared(extra: set[str]) -> dict[str, str]:
    """Third-party modules the service imports that neither the core dependencies nor
    ``extra`` provide: module -> why."""
    core, _ = declared()
    providers = packages_distributions()
    problems = {}
    for top, where in sorted(third_party_imports().items()):
        dists = {_canonical(d) for d in providers.get(top, [])}
        if not dists:
            problems[top] = f"{top} (imported by {sorted(where)}) is not installed here"
        elif not dists & (core | extra):
            problems[top] = (
                f"{top} (from {sorted(dists)}, imported by {sorted(where)}) is in neither the"
                " core dependencies nor the ledger-service extra"
            )
    return problems


# the extra before issue 33: prometheus_client (and anyio, imported by the sequencer) missing
OLD_EXTRA = {"starlette", "uvicorn", "httptools", "uvloop", "psycopg", "httpx"}


def test_every_module_the_service_imports_is_declared() -> None:
    assert {"prometheus_client", "anyio"} <= set(undeclared(OLD_EXTRA))  # reproduced
    assert {"starlette", "uvicorn", "psycopg", "prometheus_client", "httpx"} <= set(
        third_party_imports()
    )
    problems = undeclared(declared()[1])
    assert not problems, "\n".join(problems.values())


def test_the_missing_module_message_names_a_declared_package() -> None:
    core, extra = declared()
    providers = packages_distributions()
    for top in third_party_imports():
        if not {_canonical(d) for d in providers.get(top, [])} & core:
            assert top in SERVICE_PACKAGES, f"{top}: list it in SERVICE_PACKAGES"
    for top, package in SERVICE_PACKAGES.items():
        assert _requirement_name(package) in extra, f"{package} is not in the extra"
        error = missing_module(ModuleNotFoundError(f"No module named '{top}'", name=f"{top}.sub"))
        assert isinstance(error, InputError)
        assert package in error.message and "ledger-service" in (error.hint or "")


def test_a_module_outside_the_list_is_not_blamed_on_the_extra() -> None:
    error = missing_module(ModuleNotFoundError("No module named 'zzz_gone'", name="zzz_gone"))
    assert "zzz_gone" in error.message and "reinstall" in (error.hint or "")


def test_the_message_on_a_missing_prometheus_client(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Reproduced first: with the old extra, prometheus_client was missing and the message said
    to install that same extra. Now it names the package (and the extra does install it)."""
    import attest.ledger.service.app  # noqa: F401  (loaded, so that it is re-imported below)
    from attest.cli import main

    for name in ("attest.ledger.service.app", "attest.ledger.service.metrics"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import raises ModuleNotFoundError
    key = tmp_path / "k.key"
    key.write_text("unused")
    clients = tmp_path / "clients.yaml"
    clients.write_text("clients: []\n")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "ledger", "serve", "--db", "dbname=x", "--key", str(key),
                "--origin", "a.example/log", "--clients", str(clients),
            ]
        )  # fmt: skip
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "prometheus-client" in err and "Traceback" not in err


@pytest.mark.slow
def test_the_extra_alone_installs_what_the_service_imports(tmp_path: Path) -> None:
    """A fresh virtual environment (no system site packages) with ``pip install .[ledger-service]``
    only: the service imports and ``attest ledger serve --help`` runs. Needs pip to reach an
    index (PyPI here and in CI); pip's cache keeps it quick."""
    venv = tmp_path / "venv"
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         f"{ROOT}[ledger-service]"],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    if install.returncode != 0 and re.search(
        r"(?i)(connection|network|resolve|temporary failure|no matching distribution)",
        install.stderr,
    ):
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"pip could not reach the index: {install.stderr[-2000:]}")
        pytest.skip(f"pip could not reach the index: {install.stderr[-500:]}")
    assert install.returncode == 0, install.stderr[-3000:]
    for command in (
        [str(python), "-c", "import attest.ledger.service.app, attest.ledger.service.guard"],
        [str(venv / "bin" / "attest"), "ledger", "serve", "--help"],
    ):
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-3000:]
    assert "--max-connections" in done.stdout
    assert time.monotonic() - began < 300, "the extra took too long to install"
