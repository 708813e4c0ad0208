"""Signing on the node (``collect --ray --targets``) without Ray: the key a node finds (targets.yaml
path, else its environment), one target's task run here signing its final evidence bytes, the
driver's check of what came back, and the refusal of an unsigned target when signing was asked
for. The same on a real local cluster: tests/integration/test_ray_cluster.py."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from _collect_models import make_spec

from attest.certificate.signing import generate_keypair
from attest.cli import main
from attest.collection.cluster.bundle import pack_spec
from attest.collection.cluster.node_signing import (
    KEY_ENV,
    NAME_ENV,
    NodeKey,
    load_node_collector,
    returned_statement,
)
from attest.collection.cluster.ray_dispatch import (
    TargetOrder,
    _signed_or_refused,
    _write_target,
    collect_target,
)
from attest.collection.cluster.targets import parse_targets
from attest.errors import CollectError
from attest.evidence.model import Evidence


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    made = {n: generate_keypair(tmp_path / "keys" / n, passphrase=None) for n in ("a", "b")}
    return {n: (k, p) for n, (k, p, _) in made.items()}


def test_the_node_key_is_targets_yaml_path_else_the_nodes_environment(
    keys: dict[str, tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(NAME_ENV, raising=False)
    assert load_node_collector("t", None) is None  # no key anywhere: unsigned
    monkeypatch.setenv(KEY_ENV, str(keys["a"][0]))
    found = load_node_collector("t", None)
    assert found is not None and found.name == "a" and found.path == str(keys["a"][0])
    monkeypatch.setenv(NAME_ENV, "gpu-pool")
    found = load_node_collector("t", NodeKey(path=str(keys["b"][0])))
    assert found is not None and found.path == str(keys["b"][0]) and found.name == "gpu-pool"
    found = load_node_collector("t", NodeKey(name="named-in-targets"))
    assert found is not None and found.path == str(keys["a"][0])
    assert found.name == "named-in-targets"


def test_a_key_the_node_cannot_load_fails_the_target_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(
        CollectError, match=r"target gpu: the collector key on node .*collector_key"
    ):
        load_node_collector("gpu", NodeKey(path=str(tmp_path / "absent.key")))
    locked, _, _ = generate_keypair(tmp_path / "locked", passphrase=b"secret")
    monkeypatch.delenv("ATTEST_KEY_PASSPHRASE", raising=False)
    monkeypatch.setenv(KEY_ENV, str(locked))
    with pytest.raises(CollectError, match=r"\$ATTEST_COLLECTOR_KEY.*no passphrase"):
        load_node_collector("gpu", None)  # never a prompt on a node
    monkeypatch.setenv("ATTEST_KEY_PASSPHRASE", "secret")
    assert load_node_collector("gpu", None) is not None


def test_targets_yaml_carries_the_key_path_and_name_but_ray_never_sees_them() -> None:
    targets = parse_targets(
        {"a": {"num_cpus": 1, "collector_key": "/etc/attest/collector.key", "collector_name": "x"}}
    )
    assert targets["a"].collector_key == "/etc/attest/collector.key"
    assert "collector_key" not in targets["a"].ray_options()
    assert "collector_name" not in str(targets["a"].ray_options())


def _payload(statement: bytes) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(json.loads(statement)["payload"])))


def test_a_targets_task_signs_its_final_evidence_and_the_driver_writes_it_as_it_came(
    tmp_path: Path, keys: dict[str, tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    spec = make_spec(tmp_path / "m", spec_extra="repeats: 2\nthreads: 1\n")
    out = tmp_path / "run" / "evidence.json"
    order = TargetOrder(
        folder=str(out.parent / "evidence.targets" / "cpu"),
        address="10.0.0.1:6379",
        engine_version="2.x",
        requested={"num_cpus": 1.0},
        key=NodeKey(path=str(keys["a"][0]), name="pool-cpu"),
    )
    result = collect_target("cpu", pack_spec(spec), order=order, node="n1", attempt=2)
    evidence = Evidence.model_validate_json(result["evidence"])
    assert evidence.targets == ["cpu"]
    (record,) = evidence.dispatch
    assert (record.node, record.attempts, record.address) == ("n1", 2, "10.0.0.1:6379")
    predicate = _payload(result["statement"])["predicate"]
    assert predicate["target"] == "cpu" and predicate["collector"]["name"] == "pool-cpu"
    assert predicate["dispatch"]["engine"] == "ray" and predicate["dispatch"]["nodes"]
    subjects = {s["name"]: s["digest"]["sha256"] for s in _payload(result["statement"])["subject"]}
    assert subjects["evidence:evidence.json"] == hashlib.sha256(result["evidence"]).hexdigest()
    assert returned_statement("cpu", result["evidence"], result["statement"]) is not None
    assert _signed_or_refused("cpu", result, required=True) == (
        returned_statement("cpu", result["evidence"], result["statement"]),
        None,
    )

    # the driver: byte for byte beside each other; an unsigned rerun removes the old statement
    _, path = _write_target(out, "cpu", result)
    assert path.read_bytes() == result["evidence"]
    assert path.with_name("evidence.intoto.json").read_bytes() == result["statement"]
    _write_target(out, "cpu", {**result, "statement": None})
    assert not path.with_name("evidence.intoto.json").exists()

    # what the driver refuses: unsigned when required, a statement of other bytes or target
    unsigned = {**result, "statement": None}
    assert _signed_or_refused("cpu", unsigned, required=False) == (None, None)
    _, why = _signed_or_refused("cpu", unsigned, required=True)
    assert why is not None and why.startswith("target cpu: its evidence came back unsigned")
    edited = {**result, "evidence": result["evidence"].replace(b'"cpu"', b'"gpu"', 1)}
    assert "covers other evidence bytes" in str(_signed_or_refused("cpu", edited, True)[1])
    assert "is for target 'cpu'" in str(_signed_or_refused("gpu", result, True)[1])
    garbage = {**result, "statement": b"{}"}
    assert "not readable" in str(_signed_or_refused("cpu", garbage, False)[1])


def _collect(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    code = info.value.code
    return (code if isinstance(code, int) else 0), out + err


def test_collect_refuses_a_driver_key_with_targets_and_require_signed_without_a_key(
    tmp_path: Path, keys: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text("a: {num_cpus: 1}\n")
    spec, out = str(tmp_path / "attest.yaml"), str(tmp_path / "e.json")
    code, text = _collect(
        ["collect", spec, "--ray", "auto", "--targets", str(targets), "--key", str(keys["a"][0]),
         "-o", out],
        capsys,
    )  # fmt: skip
    assert code == 2 and "signed on the node that measured it" in text and "collector_key" in text
    code, text = _collect(["collect", spec, "--require-signed", "-o", out], capsys)
    assert code == 2 and "--require-signed: this collect would be unsigned" in text
