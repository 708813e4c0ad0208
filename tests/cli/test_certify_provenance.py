"""Signed evidence with provenance (issue 35): ``attest collect --key`` signs what it measured,
``attest certify --evidence --trust`` accepts only evidence its trusted collectors signed, for
the files and target certified, young enough and from a recent enough attest, and the
certificate, ``verify`` and ``inspect`` say who collected each target's evidence, where, when.

One real failing evidence file (examples/unstable, 10 repeats) is collected and signed once;
every test works on copies of it. No test collects again.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_certify_inconsistent import CASES

from attest.certificate.signing import generate_keypair
from attest.cli import main
from attest.verification.trust import add_key, empty_trust_store, load_trust_store, save_trust_store

REPO = Path(__file__).resolve().parents[2]
_RUNS = itertools.count()  # each certify writes into a folder of its own
STRICT = REPO / "policies" / "clinical-strict.yaml"


def run(args: list[Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    code = info.value.code
    return (code if isinstance(code, int) else 0), out + err


def _store(path: Path, *keys: tuple[Path, str, tuple[str, ...]]) -> Path:
    store = empty_trust_store(str(path))
    for pub, name, roles in keys:
        store, _ = add_key(store, pub.read_bytes(), name=name, roles=roles)
    save_trust_store(store, path)
    return path


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """examples/unstable collected and signed by collector node-a; the release key; trust
    stores: node-a as collector (trust), as auditor only (wrong_role), and a store that
    knows only another collector (untrusted)."""
    root = tmp_path_factory.mktemp("provenance")
    folder = root / "unstable"
    shutil.copytree(
        REPO / "examples" / "unstable", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    spec = folder / "attest.yaml"
    spec.write_text(spec.read_text().replace("repeats: 100", "repeats: 10"))
    collector, collector_pub, _ = generate_keypair(root / "node-a", passphrase=None)
    _, other_pub, _ = generate_keypair(root / "node-b", passphrase=None)
    release, release_pub, _ = generate_keypair(root / "release", passphrase=None)
    evidence = root / "collected" / "evidence.json"
    with pytest.raises(SystemExit) as info:
        main(["collect", str(spec), "-o", str(evidence), "-q", "--key", str(collector)])
    assert info.value.code in (0, None)
    rel = (release_pub, "release", ())
    trust = _store(root / "trust.yaml", rel)
    with pytest.raises(SystemExit) as info:  # the collector role, as a user gives it
        main(["trust", "add", str(collector_pub), "--trust", str(trust), "--name", "node-a",
              "--role", "collector"])  # fmt: skip
    assert info.value.code in (0, None)
    return {
        "root": root,
        "spec": spec,
        "evidence": evidence,
        "release": release,
        "trust": trust,
        "wrong_role": _store(root / "auditor.yaml", rel, (collector_pub, "node-a", ("auditor",))),
        "untrusted": _store(root / "other.yaml", rel, (other_pub, "node-b", ("collector",))),
        "collector_pub": collector_pub,
        "release_pub": release_pub,
    }


def _copy(kit: dict[str, Any], into: Path) -> Path:
    """The signed evidence folder copied (evidence, statement, exported files)."""
    shutil.copytree(kit["evidence"].parent, into)
    return into / "evidence.json"


def _certify(
    kit: dict[str, Any],
    evidence: str | Path,
    capsys: pytest.CaptureFixture[str],
    *extra: Any,
    policy: Any = STRICT,
    trust: Any = "trust",
) -> tuple[int, str, Path]:
    out = Path(kit["root"]) / f"out-{next(_RUNS)}"
    args = ["certify", kit["spec"], "--policy", policy, "--key", kit["release"],
            "--evidence", evidence, "-o", out / "cert.json", "-q", *extra]  # fmt: skip
    if trust is not None:
        args += ["--trust", kit[trust]]
    code, text = run(args, capsys)
    return code, text, out / "cert.json"


def _statement(certificate: Path) -> dict[str, Any]:
    envelope = json.loads(certificate.read_text())
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def _payload(path: Path) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(json.loads(path.read_text())["payload"])))


def _site(kit: dict[str, Any], name: str, evidence: str) -> Path:
    """research with an ``evidence:`` block (a site policy)."""
    path = Path(kit["root"]) / f"{name}.yaml"
    path.write_text(f"extends: research\nid: {name}\nversion: '1'\nevidence: {evidence}\n")
    return path


def test_collect_signs_a_statement_the_schema_accepts(kit: dict[str, Any]) -> None:
    import jsonschema

    path = kit["evidence"].with_name("evidence.intoto.json")
    statement = _payload(path)
    schema = json.loads((REPO / "schemas" / "evidence-statement.schema.json").read_text())
    jsonschema.validate(statement, schema)
    names = sorted(s["name"] for s in statement["subject"])
    assert names == ["evidence:evidence.json", "probe:probe.safetensors", "spec:attest.yaml",
                     "weights:weights.safetensors"]  # fmt: skip
    predicate = statement["predicate"]
    assert predicate["collector"]["name"] == "node-a" and predicate["collector"]["role"] == (
        "collector"
    )
    assert predicate["dispatch"] == {"engine": "local", "workers": 1, "address": None, "nodes": []}
    assert predicate["target"] == json.loads(kit["evidence"].read_text())["targets"][0]
    assert predicate["hardware"]["target"] == predicate["target"] and predicate["software"]["torch"]
    assert predicate["started_at"] <= predicate["finished_at"]


def test_signed_evidence_is_certified_and_every_reader_names_its_collector(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, certified, cert = _certify(kit, kit["evidence"], capsys, policy="research")
    assert code == 0, certified
    ((target, record),) = _statement(cert)["predicate"]["evidence_provenance"].items()
    assert record["signed"] is True and record["collected_by"] == "collect"
    assert record["collector"]["name"] == "node-a"
    assert record["collector"]["trusted_as"] == "role collector"
    assert record["host"] and record["started_at"] <= record["finished_at"]
    statement_file = kit["evidence"].with_name("evidence.intoto.json")
    assert record["statement_digest"]["sha256"] == _sha256(statement_file)
    assert record["evidence_digest"]["sha256"] == _sha256(kit["evidence"])
    line = f"{target}: signed by node-a (collector, key {record['collector']['keyid'][:16]}"
    assert f"  evidence {line}" in certified  # certify says so too
    code, text = run(["verify", cert, "--trust", kit["trust"], "--artifact",
                      cert.with_name("model.onnx"), "--no-state"], capsys)  # fmt: skip
    assert code == 0, text
    assert f"evidence {line}" in text and f"on {record['host']} at" in text
    code, text = run(["inspect", cert], capsys)
    assert code == 0 and line in text


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_signed_evidence_of_a_real_defect_fails_the_policy_not_the_provenance(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, cert = _certify(kit, kit["evidence"], capsys)
    assert code == 1, text
    assert "EVIDENCE_" not in text and not cert.exists()


@pytest.mark.parametrize(("edit", "_named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_hand_edit_of_signed_evidence_is_caught_by_the_signature(
    kit: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    _named: Any,
) -> None:
    evidence = _copy(kit, tmp_path / "edited")
    data = json.loads(evidence.read_text())
    original = copy.deepcopy(data)
    edit(data)
    assert data != original
    evidence.write_text(json.dumps(data))
    code, text, cert = _certify(kit, evidence, capsys, policy="research")
    assert code == 2, text
    assert "EVIDENCE_EDITED" in text and "changed after collection" in text
    assert not cert.exists()


def _reencode(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    envelope = json.loads(path.read_text())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    change(payload)
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    path.write_text(json.dumps(envelope))


def _point_at_edited_evidence(evidence: Path) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        subject = next(s for s in payload["subject"] if s["name"].startswith("evidence:"))
        subject["digest"]["sha256"] = _sha256(evidence)

    return change


@pytest.mark.parametrize(
    "how", ["statement follows the edit", "target renamed", "collector renamed", "signature moved"]
)
def test_an_edited_statement_is_refused_by_its_signature(
    kit: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    evidence = _copy(kit, tmp_path / "copy")
    statement = evidence.with_name("evidence.intoto.json")
    if how == "statement follows the edit":
        data = json.loads(evidence.read_text())
        CASES[0][1](data)  # every status reads pass
        evidence.write_text(json.dumps(data))
        _reencode(statement, _point_at_edited_evidence(evidence))
    elif how == "target renamed":
        _reencode(statement, lambda p: p["predicate"].update(target="cuda:sm_90"))
    elif how == "collector renamed":
        _reencode(statement, lambda p: p["predicate"]["collector"].update(name="trusted-lab"))
    else:  # the signature of another statement by the same key
        envelope = json.loads(statement.read_text())
        envelope["signatures"][0]["sig"] = base64.b64encode(b"\x01" * 64).decode()
        statement.write_text(json.dumps(envelope))
    code, text, _ = _certify(kit, evidence, capsys, policy="research")
    assert code == 2, text
    assert "EVIDENCE_SIGNATURE_INVALID" in text


@pytest.mark.parametrize(
    ("trust", "words"),
    [
        ("untrusted", ("EVIDENCE_UNTRUSTED_COLLECTOR", "not in the trust store")),
        ("wrong_role", ("EVIDENCE_UNTRUSTED_COLLECTOR", "node-a", "(auditor)")),
    ],
)
def test_a_collector_the_trust_store_does_not_give_the_role_is_refused(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str], trust: str, words: tuple[str, ...]
) -> None:
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy="research", trust=trust)
    assert code == 2, text
    assert all(w in text for w in words), text
    assert not cert.exists()


def test_a_policy_may_name_a_collector_key_instead_of_the_role(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    policy = _site(kit, "named", "{require_signed: true, collectors: [node-a]}")
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy=policy, trust="wrong_role")
    assert code == 0, text
    (record,) = _statement(cert)["predicate"]["evidence_provenance"].values()
    assert record["collector"]["trusted_as"] == "name node-a"


def test_a_statement_is_not_reusable_for_another_target_name(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, _ = _certify(kit, f"cuda:sm_90={kit['evidence']}", capsys, policy="research")
    assert code == 2, text
    assert "EVIDENCE_TARGET_MISMATCH" in text and "'cuda:sm_90'" in text


def _bound_store(kit: dict[str, Any], capsys: pytest.CaptureFixture[str], *targets: str) -> str:
    """The release key, and node-a added as a collector bound by ``attest trust add --target``
    to ``targets``; its name in ``kit``."""
    name = f"bound-{next(_RUNS)}"
    path = _store(Path(kit["root"]) / f"{name}.yaml", (kit["release_pub"], "release", ()))
    flags = [a for t in targets for a in ("--target", t)]
    code, text = run(["trust", "add", kit["collector_pub"], "--trust", path, "--name", "node-a",
                      "--role", "collector", *flags], capsys)  # fmt: skip
    assert code == 0, text
    kit[name] = path
    return name


def test_a_collector_key_bound_to_other_targets_is_refused(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    trust = _bound_store(kit, capsys, "cuda:sm_90", "rocm:gfx942")
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy="research", trust=trust)
    assert code == 2, text
    assert "EVIDENCE_TARGET_NOT_ALLOWED" in text and "cuda:sm_90, rocm:gfx942" in text, text
    assert not cert.exists()
    # the binding widened with attest trust targets: the same evidence now counts
    keyid = next(k.keyid for k in load_trust_store(kit[trust]).keys if k.name == "node-a")
    target = json.loads(kit["evidence"].read_text())["targets"][0]
    code, text = run(["trust", "targets", keyid[:16], "--trust", kit[trust], "--add", target],
                     capsys)  # fmt: skip
    assert code == 0 and target in text, text
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy="research", trust=trust)
    assert code == 0, text
    # taking every target away would read as "any": refused
    code, text = run(["trust", "targets", keyid[:16], "--trust", kit[trust], "--remove", target,
                      "--remove", "cuda:sm_90", "--remove", "rocm:gfx942"], capsys)  # fmt: skip
    assert code != 0 and "bound to no target" in text, text


def test_a_collector_key_bound_to_its_own_target_counts(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    target = json.loads(kit["evidence"].read_text())["targets"][0]
    trust = _bound_store(kit, capsys, target)
    code, text = run(["trust", "list", "--trust", kit[trust]], capsys)
    assert f"evidence only for targets: {target}" in text, text
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy="research", trust=trust)
    assert code == 0, text
    (record,) = _statement(cert)["predicate"]["evidence_provenance"].values()
    assert record["collector"]["name"] == "node-a"


@pytest.mark.parametrize("role", ["weights", "probe", "spec"])
def test_evidence_of_other_weights_probe_or_spec_is_refused_naming_which(
    kit: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], role: str
) -> None:
    folder = tmp_path / "release"
    shutil.copytree(kit["spec"].parent, folder)
    changed = {
        "weights": "weights.safetensors",
        "probe": "probe.safetensors",
        "spec": "attest.yaml",
    }[role]
    with (folder / changed).open("ab") as fh:
        fh.write(b"\n# another file\n" if role == "spec" else b"\0")
    copy_kit = {**kit, "spec": folder / "attest.yaml"}
    code, text, _ = _certify(copy_kit, kit["evidence"], capsys, policy="research")
    assert code == 2, text
    assert "EVIDENCE_SUBJECT_MISMATCH" in text and f"other {role} ({changed}" in text


@pytest.mark.parametrize(
    ("policy", "at", "code_word"),
    [
        (STRICT, "+31d", "EVIDENCE_TOO_OLD"),
        (STRICT, "-1d", "EVIDENCE_FROM_THE_FUTURE"),
        ("min-version", None, "EVIDENCE_TOOL_TOO_OLD"),
    ],
)
def test_too_old_evidence_or_attest_is_refused(
    kit: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    policy: Any,
    at: str | None,
    code_word: str,
) -> None:
    from datetime import timedelta

    from attest.core.times import format_timestamp, parse_timestamp

    finished = _payload(kit["evidence"].with_name("evidence.intoto.json"))["predicate"][
        "finished_at"
    ]
    extra: list[str] = []
    if at is not None:
        moment = parse_timestamp(finished) + timedelta(days=int(at[:-1]))
        extra = ["--at", format_timestamp(moment)]
    if policy == "min-version":
        policy = _site(kit, "min-version", "{min_attest_version: '99.0'}")
    code, text, _ = _certify(kit, kit["evidence"], capsys, *extra, policy=policy)
    assert code == 2, text
    assert code_word in text


def test_unsigned_evidence_is_refused_by_clinical_strict_and_recorded_under_research(
    kit: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = _copy(kit, tmp_path / "unsigned")
    evidence.with_name("evidence.intoto.json").unlink()
    code, text, _ = _certify(kit, evidence, capsys)
    assert code == 2 and "EVIDENCE_UNSIGNED" in text and "clinical-strict" in text
    code, text, _ = _certify(kit, evidence, capsys, trust=None)
    assert code == 2 and "TRUST_STORE_REQUIRED" in text and "--trust" in text

    code, text, cert = _certify(kit, evidence, capsys, policy="research", trust=None)
    assert code == 0, text
    ((target, record),) = _statement(cert)["predicate"]["evidence_provenance"].items()
    assert record["signed"] is False and record["collector"] is None
    assert record["evidence_digest"]["sha256"] == _sha256(evidence)
    code, text = run(["verify", cert, "--trust", kit["trust"], "--artifact",
                      cert.with_name("model.onnx"), "--no-state"], capsys)  # fmt: skip
    assert code == 0 and f"evidence {target}: UNSIGNED evidence" in text
    code, text = run(["inspect", cert], capsys)
    assert f"{target}: UNSIGNED evidence" in text


def test_without_a_trust_store_a_statement_still_binds_the_file_but_is_not_trusted(
    kit: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy="research", trust=None)
    assert code == 0, text
    (record,) = _statement(cert)["predicate"]["evidence_provenance"].values()
    assert record["signed"] is False and "no trust store" in record["note"]

    evidence = _copy(kit, tmp_path / "edited")
    data = json.loads(evidence.read_text())
    data["created_at"] = "2020-01-01T00:00:00Z"  # an edit the figures cannot show
    evidence.write_text(json.dumps(data))
    code, text, _ = _certify(kit, evidence, capsys, policy="research", trust=None)
    assert code == 2 and "EVIDENCE_EDITED" in text


def test_collect_refuses_signing_options_that_cannot_apply(
    kit: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = kit["evidence"]
    code, text = run(["collect", kit["spec"], "-o", tmp_path / "e.json", "--name", "x"], capsys)
    assert code == 2 and "they need --key" in text
    code, text = run(["collect", kit["spec"], "-o", tmp_path / "e.json", "--role", "x"], capsys)
    assert code == 2 and "they need --key" in text
    args = ["collect", "--merge", evidence, evidence, "-o", tmp_path / "m.json", "--key",
            kit["root"] / "node-a.key"]  # fmt: skip
    code, text = run(args, capsys)
    assert code == 2 and "not a merge" in text


def test_the_report_and_the_exports_name_each_target_s_collector(
    kit: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, cert = _certify(kit, kit["evidence"], capsys, policy="research")
    assert code == 0, text
    ((target, record),) = _statement(cert)["predicate"]["evidence_provenance"].items()
    line = f"{target}: signed by node-a (collector, key {record['collector']['keyid'][:16]}"
    folder, trust = cert.parent, kit["trust"]
    code, text = run(["report", cert, "--trust", trust, "-o", folder / "r.html"], capsys)
    assert code == 0, text
    import html

    assert line in html.unescape((folder / "r.html").read_text())
    code, text = run(["export", "cyclonedx", cert, "--trust", trust, "-o", folder / "b.json"],
                     capsys)  # fmt: skip
    assert code == 0, text
    properties = json.loads((folder / "b.json").read_text())["properties"]
    assert properties[0]["name"] == f"gradient-attest:evidence:{target}"
    assert properties[0]["value"].startswith(line)
    code, text = run(["export", "spdx", cert, "--trust", trust, "-o", folder / "s.json"], capsys)
    assert code == 0 and line in (folder / "s.json").read_text()
    code, text = run(["export", "test-result", cert, "--trust", trust, "--key", kit["release"],
                      "-o", folder / "t.json"], capsys)  # fmt: skip
    assert code == 0, text
    configuration = _payload(folder / "t.json")["predicate"]["configuration"]
    assert {"name": f"evidence-statement:{target}", "digest": record["statement_digest"]} in (
        configuration
    )
