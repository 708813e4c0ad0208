"""``attest certify --evidence``: one certificate over the evidence of several hardware targets,
and ``attest verify --check-environment`` matching a server to one of its targets.

The digits example is collected once, here (the CPU target), and signed by this machine's
collector key. The other targets are that evidence as another machine would have written and
signed it (clinical-strict requires signed evidence): the same release, another hardware
target and runtime (this machine cannot run CUDA or another ISA), and, where a test needs a
failing target, a figure that fails the policy.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from attest.certificate.signing import generate_keypair, load_private_key
from attest.cli import main
from attest.collection.provenance import sign_evidence
from attest.core.io import loads_strict
from attest.verification.trust import add_key, empty_trust_store, save_trust_store

REPO = Path(__file__).resolve().parents[2]
STRICT = REPO / "policies" / "clinical-strict.yaml"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    code = info.value.code
    return (code if isinstance(code, int) else 0), out + err


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The digits example collected once on this machine, a key and a trust store."""
    root = tmp_path_factory.mktemp("targets")
    folder = root / "digits"
    shutil.copytree(
        REPO / "examples" / "digits", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    collected = root / "cpu"
    collected.mkdir()
    collector, collector_pub, _ = generate_keypair(root / "collector", passphrase=None)
    with pytest.raises(SystemExit) as info:
        main(["collect", str(folder / "attest.yaml"), "-o", str(collected / "evidence.json"),
              "-q", "--key", str(collector), "--name", "cpu-node"])  # fmt: skip
    assert info.value.code in (0, None)
    key, pub, _ = generate_keypair(root / "release", passphrase=None)
    trust = root / "trust.yaml"
    store, _ = add_key(empty_trust_store(str(trust)), Path(pub).read_bytes(), name="release")
    store, _ = add_key(
        store, Path(collector_pub).read_bytes(), name="collector", roles=("collector",)
    )
    save_trust_store(store, trust)
    return {
        "spec": folder / "attest.yaml",
        "cpu": collected / "evidence.json",
        "key": key,
        "trust": trust,
        "root": root,
    }


def other_target(
    source: Path,
    into: Path,
    target: str,
    *,
    arch: str = "aarch64",
    fail: bool = False,
    as_name: str | None = None,
) -> Path:
    """``source``'s evidence as a machine of another target would have written it, signed by
    its collector for the target name ``as_name`` (default: ``target``) it is certified under."""
    into.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = json.loads(source.read_text())
    data["targets"] = [target]
    data["environment"]["target"] = target
    if data.get("export"):
        runtime = data["export"]["deployment"]["runtime"]
        runtime["cpu_arch"] = arch
        data["export"]["deployment"]["targets"] = [target]
        for entry in ("onnx", "probe_bundle"):  # the exported files, copied next to it
            name = data["export"][entry]["name"]
            shutil.copy(source.parent / name, into / name)
            data["export"][entry]["path"] = f"/elsewhere/{name}"
    if fail:
        # a target whose probe input 0 takes another operator path: written consistently
        # (status, figure and count together), as that target's collector would have written
        # it, since certify refuses a status its figures contradict (attest.evidence.consistency)
        topology = data["checks"]["topology"]
        topology["items"][0]["status"] = "fail"
        topology["items"][0]["metrics"]["first_divergence"] = 0
        topology["summary"]["diverging_inputs"] = 1
    path = into / "evidence.json"
    path.write_text(json.dumps(data))
    root = source.parent.parent  # the release fixture's folder: its spec and collector key
    sign_evidence(
        path,
        root / "digits" / "attest.yaml",
        load_private_key(root / "collector.key"),
        started_at=datetime.now(timezone.utc),
        name=f"{target}-node",
        target=as_name or target,
    )
    return path


def certify_args(release: dict[str, Path], out: Path, *evidence: str) -> list[str]:
    args = ["certify", str(release["spec"]), "--policy", str(STRICT), "--key", str(release["key"]),
            "--trust", str(release["trust"])]  # fmt: skip
    for item in evidence:
        args += ["--evidence", item]
    return [*args, "-o", str(out / "gradient_certificate.json"), "--json", "-q"]


def verify_args(release: dict[str, Path], out: Path) -> list[str]:
    """attest verify of the certificate in ``out`` on this machine, matching its environment."""
    cert, onnx = out / "gradient_certificate.json", out / "model.onnx"
    return ["verify", str(cert), "--trust", str(release["trust"]), "--artifact", str(onnx),
            "--check-environment", "--no-state"]  # fmt: skip


def statement_of(certificate: Path) -> dict[str, Any]:
    import base64

    envelope = json.loads(certificate.read_text())
    return dict(loads_strict(base64.b64decode(envelope["payload"])))


def policy_requiring(tmp_path: Path, patterns: list[str]) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(f"extends: {STRICT}\nid: site\nversion: '1'\nrequired_targets: {patterns}\n")
    return path


@pytest.mark.slow
def test_two_targets_one_certificate_and_the_server_matches_its_own(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arm = other_target(release["cpu"], tmp_path / "arm", "cpu:aarch64:neon", as_name="arm")
    out = tmp_path / "release"
    code, text = run(certify_args(release, out, str(release["cpu"]), f"arm={arm}"), capsys)
    assert code == 0, text
    summary = json.loads(text)
    assert [(t["name"], t["verdict"], t["required"]) for t in summary["targets"]] == [
        (json.loads(release["cpu"].read_text())["targets"][0], "pass", True),
        ("arm", "pass", True),
    ]
    cert = out / "gradient_certificate.json"
    deployment = statement_of(cert)["predicate"]["deployment"]
    assert set(deployment["per_target"]) == {summary["targets"][0]["name"], "arm"}
    assert deployment["per_target"]["arm"]["runtime"]["cpu_arch"] == "aarch64"
    findings = json.loads((out / "findings.json").read_text())
    assert {f["target"] for f in findings["findings"]} == {t["name"] for t in summary["targets"]}
    # the same subjects as a certificate collected here: the spec, weights, probe and exports
    names = {s["name"] for s in statement_of(cert)["subject"]}
    assert {"attest.yaml", "weights.safetensors", "probe.safetensors", "model.onnx"} <= names

    code, text = run([*verify_args(release, out), "--json"], capsys)
    report = json.loads(text)
    assert code == 0, report["reasons"]
    assert report["environment_target"] == summary["targets"][0]["name"]


@pytest.mark.slow
def test_a_failed_target_not_required_is_recorded_and_refused_on_its_hardware(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the failing target is this machine's hardware under another name: a server like this
    # one matches it, and must be refused because that target failed
    same = other_target(
        release["cpu"], tmp_path / "same", "cpu:here-too", arch="x86_64", fail=True, as_name="here"
    )
    arm = other_target(release["cpu"], tmp_path / "arm", "cpu:aarch64:neon")
    policy = policy_requiring(tmp_path, ["cpu:aarch64:*"])
    out = tmp_path / "release"
    args = certify_args(release, out, f"here={same}", str(arm))
    args[args.index(str(STRICT))] = str(policy)
    code, text = run(args, capsys)
    assert code == 0, text
    verdicts = {t["name"]: (t["verdict"], t["required"]) for t in json.loads(text)["targets"]}
    assert verdicts == {"here": ("fail", False), "cpu:aarch64:neon": ("pass", True)}
    code, text = run(verify_args(release, out), capsys)
    assert code == 1
    assert "ENVIRONMENT_MISMATCH" in text and "matches target here, which failed" in text


@pytest.mark.slow
def test_a_required_target_that_fails_or_is_missing_means_no_certificate(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = other_target(release["cpu"], tmp_path / "bad", "cpu:aarch64:neon", fail=True)
    out = tmp_path / "release"
    code, text = run(certify_args(release, out, str(release["cpu"]), str(bad)), capsys)
    assert code == 1
    assert not (out / "gradient_certificate.json").exists()
    failed = json.loads(text)["failed"]
    assert {f["target"] for f in failed} == {"cpu:aarch64:neon"}

    policy = policy_requiring(tmp_path, ["cuda:*"])
    args = certify_args(release, tmp_path / "r2", str(release["cpu"]))
    args[args.index(str(STRICT))] = str(policy)
    code, text = run(args, capsys)
    assert code == 1
    assert {"name": "cuda:*", "verdict": "missing", "required": True}.items() <= next(
        t for t in json.loads(text)["targets"] if t["name"] == "cuda:*"
    ).items()


def _edit(path: Path, into: Path, change: Any) -> Path:
    data = json.loads(path.read_text())
    change(data)
    into.mkdir(parents=True, exist_ok=True)
    out = into / "evidence.json"
    out.write_text(json.dumps(data))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["artifacts"]["weights"].update(sha256="0" * 64), "weights file sha256"),
        (lambda d: d["artifacts"]["spec"].update(sha256="1" * 64), "spec file sha256"),
        (lambda d: d["model"].update(version="9.9.9"), "model version"),
        (lambda d: None, "are both for target"),
    ],
)
def test_evidence_of_another_release_or_the_same_target_twice_is_refused(
    release: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Any,
    message: str,
) -> None:
    other = _edit(release["cpu"], tmp_path / "other", change)
    out = tmp_path / "release"
    # unsigned, so that what is refused is the other release (a signed copy would be refused
    # by its signature first: tests/cli/test_certify_provenance.py)
    unsigned = tmp_path / "unsigned.yaml"
    unsigned.write_text(
        f"extends: {STRICT}\nid: site\nversion: '1'\nevidence: {{require_signed: false}}\n"
    )
    args = certify_args(release, out, str(release["cpu"]), str(other))
    args[args.index(str(STRICT))] = str(unsigned)
    code, text = run(args, capsys)
    assert code == 2
    assert message in text
    assert not out.exists() or not any(out.iterdir())


def test_evidence_may_not_be_overwritten_and_budget_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, _, _ = generate_keypair(tmp_path / "k", passphrase=None)
    evidence = tmp_path / "evidence.json"
    evidence.write_text("{}")
    base = [
        "certify",
        str(REPO / "examples/digits/attest.yaml"),
        "--policy",
        str(STRICT),
        "--key",
        str(key),
        "--evidence",
        str(evidence),
    ]
    code, text = run([*base, "-o", str(tmp_path / "cert.json")], capsys)
    assert code == 2 and "would be overwritten" in text
    code, text = run([*base, "--budget", "10m", "-o", str(tmp_path / "c" / "cert.json")], capsys)
    assert code == 2 and "--budget" in text


@pytest.mark.slow
def test_a_spec_other_than_the_evidence_s_is_refused(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "changed"
    shutil.copytree(release["spec"].parent, folder)
    (folder / "attest.yaml").write_text((folder / "attest.yaml").read_text() + "# edited\n")
    args = certify_args(release, tmp_path / "out", str(release["cpu"]))
    args[1] = str(folder / "attest.yaml")
    code, text = run(args, capsys)
    assert code == 2
    # the collector's statement names the spec it was collected from
    assert "EVIDENCE_SUBJECT_MISMATCH" in text and "other spec (attest.yaml" in text
