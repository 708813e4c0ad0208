"""The verifier's later steps: rollback state, artifact naming, time, probe and environment
extension points (with stand-in extension modules), and the report."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, iso, make_world

from attest.errors import InputError


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_rollback_state_rises_only_on_success_and_compares_semver(world: World) -> None:
    state = world.root / "state" / "verify.json"
    assert world.verify(
        world.write(world.envelope(model={"name": "m", "version": "1.9.0"})),
        state_file=state,
        at=None,
    ).verified
    recorded = json.loads(state.read_text())["models"]["m"]
    assert recorded["version"] == "1.9.0" and recorded["certificate_id"] == "cert-0001"
    newer = world.write(world.envelope(model={"name": "m", "version": "1.10.0"}), "newer.json")
    assert world.verify(newer, state_file=state, at=None).verified
    assert json.loads(state.read_text())["models"]["m"]["version"] == "1.10.0"
    older = world.write(world.envelope(model={"name": "m", "version": "1.9.5"}), "older.json")
    report = world.verify(older, state_file=state, at=None)
    assert report.codes == ["ROLLBACK"]
    assert json.loads(state.read_text())["models"]["m"]["version"] == "1.10.0"
    other_model = world.write(world.envelope(model={"name": "n", "version": "0.1.0"}), "n.json")
    assert world.verify(other_model, state_file=state, at=None).verified


def test_rejected_or_audit_verifications_do_not_touch_the_state(world: World) -> None:
    state = world.root / "state.json"
    failed = world.write(world.envelope(verdict="fail"))
    assert not world.verify(failed, state_file=state, at=None).verified
    assert not state.exists()
    good = world.write(world.envelope(), "good.json")
    assert world.verify(good, state_file=state, at=NOW).verified  # --at: audit, read-only
    assert not state.exists()


def test_a_damaged_state_file_is_an_error_not_a_reset(world: World) -> None:
    state = world.root / "state.json"
    state.write_text('{"version": 1, "models": {"m": {"version": 3}}}')
    with pytest.raises(InputError, match="expected format"):
        world.verify(world.write(world.envelope()), state_file=state)
    state.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        world.verify(world.write(world.envelope()), state_file=state)


def test_name_equals_path_binds_a_renamed_file(world: World) -> None:
    renamed = world.root / "deployed-v1.onnx"
    renamed.write_bytes(world.onnx.read_bytes())
    cert = world.write(world.envelope())
    report = world.verify(cert, artifacts=[f"model.onnx={renamed}"])
    assert report.verified and report.subjects_checked == ["model.onnx"]
    report = world.verify(cert, artifacts=[("probe.npz", renamed)])
    assert report.codes == ["SUBJECT_MISMATCH"]
    with pytest.raises(InputError, match="subject name"):
        world.verify(cert, artifacts=[f"../x={renamed}"])


def test_usage_errors_raise(world: World) -> None:
    cert = world.write(world.envelope())
    with pytest.raises(InputError, match="no artifact"):
        world.verify(cert, artifacts=[])
    with pytest.raises(InputError, match="does not exist"):
        world.verify(world.root / "absent.json")
    with pytest.raises(InputError, match="clock skew"):
        world.verify(cert, clock_skew=timedelta(days=3))


def test_clock_skew_and_audit_time(world: World) -> None:
    cert = world.write(world.envelope(issued_at=iso(NOW + timedelta(seconds=30))))
    assert world.verify(cert).verified  # within the default 60 s skew
    assert world.verify(cert, clock_skew=timedelta(0)).codes == ["NOT_YET_VALID"]
    expired = world.write(world.envelope(expires_at=iso(NOW + timedelta(days=1))), "e.json")
    assert world.verify(expired, at=NOW + timedelta(days=2)).codes == ["EXPIRED"]
    assert world.verify(expired, at=NOW).verified


def test_report_to_dict_is_json(world: World) -> None:
    report = world.verify(world.write(world.envelope()))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["verified"] is True and data["reasons"] == []
    assert data["subjects_checked"] == ["model.onnx", "probe.npz"]
    assert data["signers"][0]["keyid"] == world.key.keyid
    assert data["model"] == {"name": "digits-cnn", "version": "1.2.0"}
    assert report.statement is not None and report.statement["predicate"]["verdict"] == "pass"


@dataclass
class _Outcome:
    passed: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "message": self.message}


def _install(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: Any) -> None:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)


def test_probe_extension_is_called_with_the_checked_files(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bytes, bytes, dict[str, Any]]] = []

    def run_probe(
        onnx: bytes,
        probe: bytes,
        *,
        certified_env: dict[str, Any],
        onnx_sha256: str,
        external_data: dict[str, bytes],
    ) -> _Outcome:
        assert len(onnx_sha256) == 64 and external_data == {}
        calls.append((onnx, probe, certified_env))
        return _Outcome(passed=len(calls) == 1, message="largest error 0.5 at (0, 3)")

    _install(monkeypatch, "fake_probe", run_probe=run_probe)
    monkeypatch.setattr("attest.verification.verifier.PROBE_MODULE", "fake_probe")
    cert = world.write(world.envelope(deployment={"runtime": {"intra_op_threads": 1}}))
    report = world.verify(cert, artifacts=[world.onnx], probe=f"probe.npz={world.probe}")
    assert report.verified, report.reasons
    # the bytes hashed in step 6, not paths to read again
    assert calls == [(world.onnx.read_bytes(), world.probe.read_bytes(), {"intra_op_threads": 1})]
    assert report.probe == {"passed": True, "message": "largest error 0.5 at (0, 3)"}
    assert world.verify(cert, artifacts=[world.onnx], probe=world.probe).codes == ["PROBE_MISMATCH"]
    # the probe bundle must itself be a subject, and the ONNX file must be given
    stray = world.root / "probe.npz"
    stray.write_bytes(b"not the certified bundle")
    assert world.verify(cert, artifacts=[world.onnx], probe=stray).codes == ["SUBJECT_MISMATCH"]
    assert len(calls) == 2  # not run on a rejected certificate
    assert world.verify(cert, artifacts=[world.weights], probe=world.probe).codes == [
        "ARTIFACT_MISSING"
    ]


def test_a_crashing_probe_fails_closed(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def run_probe(*args: Any, **kwargs: Any) -> _Outcome:
        raise RuntimeError("onnxruntime exploded")

    _install(monkeypatch, "fake_probe_crash", run_probe=run_probe)
    monkeypatch.setattr("attest.verification.verifier.PROBE_MODULE", "fake_probe_crash")
    report = world.verify(world.write(world.envelope()), probe=world.probe)
    assert report.codes == ["PROBE_MISMATCH"] and "exploded" in report.reasons[0][1]


@dataclass
class _Difference:
    key: str
    fatal: bool

    @property
    def message(self) -> str:
        return f"{self.key} differs"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "fatal": self.fatal}


@dataclass
class _Match:
    target: str | None
    differences: list[_Difference]
    refusal: str | None = None


def test_environment_differences_reject_only_when_fatal(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = {"cpu_arch": "x86_64", "onnxruntime_version": "1.0"}

    def match_deployment(deployment: dict[str, Any]) -> _Match:
        certified, fatal = (
            deployment["runtime"],
            deployment.get("fatal_differences") or ["cpu_arch"],
        )
        found = [_Difference(k, k in fatal) for k in certified if certified[k] != local.get(k)]
        if any(d.fatal for d in found):
            return _Match(None, found, refusal="no certified target matches: " + found[0].message)
        return _Match("cpu:x86_64", found)

    _install(monkeypatch, "fake_env", match_deployment=match_deployment)
    monkeypatch.setattr("attest.verification.verifier.ENVIRONMENT_MODULE", "fake_env")
    runtime = {"cpu_arch": "x86_64", "onnxruntime_version": "1.1"}
    cert = world.write(world.envelope(deployment={"runtime": runtime}))
    report = world.verify(cert, check_environment=True)
    assert report.verified and "environment: onnxruntime_version differs" in report.notes
    assert report.environment_target == "cpu:x86_64"
    fatal = {"runtime": runtime, "fatal_differences": ["onnxruntime_version"]}
    cert = world.write(world.envelope(deployment=fatal), "fatal.json")
    report = world.verify(cert, check_environment=True)
    assert report.codes == ["ENVIRONMENT_MISMATCH"]
    assert "onnxruntime_version differs" in report.reasons[0][1]
    assert report.environment_differences == [{"key": "onnxruntime_version", "fatal": True}]
    monkeypatch.setattr(
        "attest.verification.verifier.ENVIRONMENT_MODULE", "attest.no_such_environment"
    )
    assert world.verify(cert, check_environment=True).codes == ["ENVIRONMENT_MISMATCH"]


def test_real_environment_extension(world: World) -> None:
    environment = pytest.importorskip("attest.deployment.environment")
    pytest.importorskip("onnxruntime")
    local = environment.local_environment(threads=1)
    runtime = {k: local[k] for k in ("cpu_arch", "execution_provider", "onnxruntime_version")}
    runtime["intra_op_threads"] = 1
    same = world.write(world.envelope(deployment={"runtime": runtime}))
    assert world.verify(same, check_environment=True).verified
    elsewhere = dict(runtime, cpu_arch="sparc64")
    cert = world.write(
        world.envelope(deployment={"runtime": elsewhere, "fatal_differences": ["cpu_arch"]}),
        "elsewhere.json",
    )
    report = world.verify(cert, check_environment=True)
    assert report.codes == ["ENVIRONMENT_MISMATCH"] and "sparc64" in report.reasons[0][1]


def test_without_required_artifacts_nothing_is_checked_but_the_certificate(world: World) -> None:
    cert = world.write(world.envelope())
    report = world.verify(cert, artifacts=[], require_artifacts=False)
    assert report.verified and report.subjects_checked == []
    assert report.subjects_not_checked == ["model.onnx", "probe.npz", "weights.safetensors"]
    tampered = world.write(world.envelope(verdict="fail"), "failed.json")
    assert world.verify(tampered, artifacts=[], require_artifacts=False).codes == ["POLICY_FAILED"]


def test_several_files_hashed_in_parallel_each_judged(world: World) -> None:
    cert = world.write(world.envelope())
    files = [world.probe, world.weights]  # neither kept: hashed together, streamed
    assert world.verify(cert, artifacts=files).verified
    world.weights.write_bytes(b"other weights")
    report = world.verify(cert, artifacts=[*files, world.root / "gone.bin"])
    assert [code for code, _ in report.reasons] == ["SUBJECT_MISMATCH", "ARTIFACT_MISSING"]
    assert "weights.safetensors" in report.reasons[0][1] and "gone.bin" in report.reasons[1][1]
    assert report.subjects_checked == ["probe.npz"]
