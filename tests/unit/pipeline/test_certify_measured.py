"""certify refuses, under any policy, to sign evidence that measured nothing: the model's
reference run raised, or every check errored on every item (attest.pipeline.measured)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_pipeline import stub_spec

from attest.certificate.signing import generate_keypair
from attest.cli import main
from attest.core.io import sha256_file
from attest.errors import EvidenceError
from attest.evidence.model import Evidence
from attest.pipeline.measured import nothing_measured
from attest.pipeline.targets import certify_evidence

REPO = Path(__file__).resolve().parents[3]
RESEARCH = REPO / "policies" / "research.yaml"
FAILURE = {
    "phase": "forward",
    "module": "encoder.0",
    "op": "aten::linear",
    "error_type": "RuntimeError",
    "message": "every forward raises",
}


def _item(status: str, **metrics: float) -> dict[str, Any]:
    return {"subject": {"kind": "model"}, "status": status, "metrics": metrics}


def _check(name: str, status: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"check": name, "status": status, "items": list(items)}


def _evidence(**fields: Any) -> Evidence:
    return Evidence.model_validate(
        {"tool_version": "0", "created_at": "2026-01-01T00:00:00Z", **fields}
    )


ERRORED = {
    "gradcheck": _check("gradcheck", "error"),
    "fidelity": _check("fidelity", "computed", _item("error"), _item("error")),
}

# (evidence fields, the words of the refusal, or None when something was measured)
CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("forward raised", {"model_failure": FAILURE}, "reference run raised in the forward pass"),
    (
        "backward raised, checks measured",
        {
            "model_failure": {**FAILURE, "phase": "backward"},
            "checks": {"fidelity": _check("fidelity", "computed", _item("pass"))},
        },
        "backward pass at encoder.0",
    ),
    ("every check errored", {"checks": ERRORED}, "every check errored on every item"),
    (
        "errored checks beside not-applicable ones",
        {"checks": {**ERRORED, "mixed_precision": _check("mixed_precision", "not_applicable")}},
        "(fidelity, gradcheck)",
    ),
    (
        "one check measured",
        {"checks": {**ERRORED, "topology": _check("topology", "computed", _item("warn"))}},
        None,
    ),
    (
        "one item measured",
        {"checks": {"fidelity": _check("fidelity", "computed", _item("error"), _item("fail"))}},
        None,
    ),
    (
        "a computed check without items (summary only)",
        {"checks": {**ERRORED, "determinism": _check("determinism", "computed")}},
        None,
    ),
    ("no checks attempted", {"checks": {"resume": _check("resume", "not_implemented")}}, None),
]


@pytest.mark.parametrize(("name", "fields", "words"), CASES, ids=[c[0] for c in CASES])
def test_nothing_measured(name: str, fields: dict[str, Any], words: str | None) -> None:
    why = nothing_measured(_evidence(**fields))
    if words is None:
        assert why is None, why
    else:
        assert why is not None and words in why


@pytest.fixture
def release(tmp_path: Path) -> dict[str, Path]:
    spec = stub_spec(tmp_path)
    key, _pub, _ = generate_keypair(tmp_path / "release", passphrase=None)
    return {"spec": spec, "key": key, "root": tmp_path}


def _evidence_file(release: dict[str, Path], **fields: Any) -> Path:
    root = release["root"]
    artifacts = {
        role: {"sha256": sha256_file(root / name)}
        for role, name in (
            ("spec", "attest.yaml"),
            ("weights", "weights.safetensors"),
            ("probe", "probe.safetensors"),
        )
    }
    evidence = _evidence(model={"name": "m", "version": "1.0.0"}, artifacts=artifacts, **fields)
    path = root / "collected" / "evidence.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(evidence.model_dump(mode="json")))
    return path


# (a fake measured item would be refused first as INCONSISTENT, attest.evidence.consistency)
# (and a computed check's items would need their summary: here the checks errored whole)
WHOLE = {name: _check(name, "error") for name in ("gradcheck", "fidelity", "topology")}
REFUSED = [
    *(c for c in CASES[:1]),
    ("every check errored whole", {"checks": WHOLE}, "(fidelity, gradcheck, topology)"),
    ("backward raised", {"model_failure": {**FAILURE, "phase": "backward"}}, "backward pass"),
]


@pytest.mark.parametrize(("name", "fields", "words"), REFUSED, ids=[c[0] for c in REFUSED])
def test_certify_evidence_refuses_to_sign_under_research(
    release: dict[str, Path], name: str, fields: dict[str, Any], words: str
) -> None:
    path = _evidence_file(release, **fields)
    out = release["root"] / "out" / "gradient_certificate.json"
    with pytest.raises(EvidenceError) as info:
        certify_evidence(release["spec"], [path], policy=RESEARCH, key=release["key"], out=out)
    assert "refusing to sign" in info.value.message and words in info.value.message
    assert str(path) in info.value.message
    assert info.value.exit_code == 2
    assert not out.exists()


def test_certify_command_exits_2_naming_why(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _evidence_file(release, model_failure=FAILURE)
    out = release["root"] / "out" / "gradient_certificate.json"
    args = [
        "certify",
        str(release["spec"]),
        "--policy",
        str(RESEARCH),
        "--key",
        str(release["key"]),
    ]
    with pytest.raises(SystemExit) as info:
        main([*args, "--evidence", str(path), "-o", str(out), "-q"])
    out_text, err = capsys.readouterr()
    assert info.value.code == 2
    assert "measured nothing" in err and "every forward raises" in err
    assert "Traceback" not in out_text + err
    assert not out.exists()
