"""``attest collect --resume DIR``: a real ``attest collect`` killed with SIGKILL in its third
phase (gradients, after topology and profile) continues from its work folder, and its evidence
equals an uninterrupted collect's, wall-clock figures aside.

The kill is made deterministic by the test-only hook ``ATTEST_TEST_SIGKILL_AT_PHASE``
(attest.collection.workdir.KILL_ENV): the process sends itself SIGKILL when that phase starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from _cli_run import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _collect_models import MLP, make_spec, stable

from attest.collection.workdir import KILL_ENV, default_work_dir

ROOT = str(Path(__file__).resolve().parents[2])


def _attest(*args: Any, kill_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env.pop(KILL_ENV, None)
    if kill_at is not None:
        env[KILL_ENV] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "attest", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _view(path: Path) -> tuple[list[str], Any]:
    """The evidence's phase names, and the rest without its wall-clock figures."""
    evidence = json.loads(path.read_text())
    phases = [p["phase"] for p in evidence.pop("phases")]
    return phases, stable(evidence)


def test_a_collect_killed_in_its_third_phase_resumes_to_the_same_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = make_spec(tmp_path / "m", MLP, spec_extra="repeats: 2\nthreads: 1\n")
    whole = tmp_path / "whole" / "evidence.json"
    done = _attest("collect", spec, "-o", whole, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["reused_phases"] == []

    out = tmp_path / "run" / "evidence.json"
    work = default_work_dir(out)
    killed = _attest("collect", spec, "-o", out, "--progress", "plain", kill_at="gradients")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert "checks: gradients" in killed.stderr and not out.exists()
    assert sorted(p.name for p in work.iterdir()) == [
        "phase-01-topology.json",
        "phase-02-profile.json",
    ]

    # other inputs are refused, naming what differs, and the work folder is kept
    probe = spec.parent / "probe.safetensors"
    kept = probe.read_bytes()
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(4, 8)}, str(probe))
    code, _, err = run(capsys, "collect", spec, "-o", out, "--resume", work)
    assert code == 2 and "the probe file's sha256" in err and "the weights file" not in err, err
    probe.write_bytes(kept)

    resumed = _attest("collect", spec, "-o", out, "--resume", work, "--progress", "plain")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {work}: reusing topology, profile" in resumed.stderr
    assert "checks: topology reused" in resumed.stderr
    assert "resumed: phases topology, profile reused" in resumed.stdout
    reused = [p["phase"] for p in json.loads(out.read_text())["phases"] if p.get("reused")]
    assert reused == ["topology", "profile"]
    assert _view(out) == _view(whole)
    assert not work.exists() and not work.parent.exists()
