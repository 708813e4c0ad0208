"""The shipped policies in an installed package: built into a wheel (``attest/policies`` is a
link to the repository's policies/, packaged as package data), installed apart from the
source, and named by a site policy (``extends: clinical-strict``) and by ``--policy``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import attest
    from attest.errors import PolicyError
    from attest.policy.model import load_policy, shipped_policy_names
    site = Path(sys.argv[1])
    policy = load_policy(site)
    strict = load_policy("clinical-strict")
    try:
        load_policy("no-such-policy")
        unknown = None
    except PolicyError as exc:
        unknown = exc.hint
    print(json.dumps({
        "attest": attest.__file__,
        "names": shipped_policy_names(),
        "rules": len(policy.rules),
        "strict_rules": len(strict.rules),
        "id": policy.id,
        "unknown_hint": unknown,
    }))
    """
)


def test_extends_by_name_resolves_in_an_installed_wheel(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("attest", "policies"):  # the link attest/policies -> ../policies kept as is
        shutil.copytree(
            REPO / folder,
            source / folder,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheels), str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if built.returncode != 0 and "No module named" in built.stderr:
        pytest.skip(f"cannot build a wheel here: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("gradient_attest-*.whl")
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert not (site / "attest" / "policies").is_symlink()  # real files, no policies/ beside
    policy = tmp_path / "site-policy.yaml"
    policy.write_text("id: st-elsewhere\nversion: '1'\nextends: clinical-strict\n")
    # the installed copy first on the path (the dependencies come from this environment)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(policy)],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(found["attest"]).is_relative_to(site), found["attest"]
    assert found["names"] == ["clinical-strict", "research"]
    assert found["id"] == "st-elsewhere" and found["rules"] == found["strict_rules"] > 0
    assert "clinical-strict, research" in found["unknown_hint"]
