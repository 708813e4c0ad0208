"""The policies a server accepts (``attest verify --require-policy``, the trust store's
``accepted_policies:``) and what verify says about the certificate's policy.

Refusals are rows of the verify table (tests/unit/_policy_cases.py); here: what is accepted,
the syntax and its errors, the trust store's list, and the text and ``--json`` output."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, iso, make_world

from attest.cli import main
from attest.errors import ConfigError
from attest.verification.policy_accept import AcceptedPolicy, parse_accepted_policy
from attest.verification.trust import load_trust_store, save_trust_store

FINDINGS = [
    {"rule": "r1", "verdict": "pass"},
    {"rule": "r2", "verdict": "pass"},
    {"rule": "r3", "verdict": "warn"},
    {"rule": "r4", "verdict": "waived"},
]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _cert(w: World, policy_id: str = "clinical-strict", version: str = "1") -> Path:
    policy = {"id": policy_id, "version": version, "digest": {"sha256": "c" * 64}}
    return w.write(w.envelope(policy=policy, findings=FINDINGS))


# (certificate's policy id, version) accepted by these entries (each list given twice: as
# --require-policy and as the trust store's accepted_policies)
ACCEPTED = [
    (("clinical-strict", "1"), ["clinical-strict"]),
    (("clinical-strict", "1"), ["clinical-strict@>=1"]),
    (("clinical-strict", "1.0"), ["clinical-strict@>=1"]),
    (("clinical-strict", "1"), ["clinical-strict@>=1.0.0"]),
    (("clinical-strict", "2"), ["clinical-strict@>=1"]),
    (("clinical-strict", "1.10"), ["clinical-strict@>=1.9"]),
    (("clinical-strict", "2-beta"), ["clinical-strict"]),  # no version asked for
    (("site-clinical", "3"), ["clinical-strict@>=1", "site-clinical@>=2"]),
    (("research", "1"), ["research", "clinical-strict"]),
]


@pytest.mark.parametrize(("policy", "entries"), ACCEPTED)
@pytest.mark.parametrize("where", ["flag", "trust"])
def test_accepted(world: World, policy: tuple[str, str], entries: list[str], where: str) -> None:
    accepted = [parse_accepted_policy(e, "test") for e in entries]
    kwargs: dict[str, Any] = (
        {"accepted_policies": accepted}
        if where == "flag"
        else {"trust": replace(world.trust, accepted_policies=tuple(accepted))}
    )
    report = world.verify(_cert(world, *policy), **kwargs)
    assert report.verified, report.reasons


def test_no_list_accepts_any_policy_and_still_names_it(world: World) -> None:
    report = world.verify(_cert(world, "research"))
    assert report.verified, report.reasons
    assert report.policy == {"id": "research", "version": "1", "digest": {"sha256": "c" * 64}}
    assert report.verdict_counts == {
        "pass": 2,
        "warn": 1,
        "fail": 0,
        "waived": 1,
        "not_computed": 0,
    }


def test_refusal_names_the_policy_and_the_list(world: World) -> None:
    trust = replace(world.trust, accepted_policies=(AcceptedPolicy("clinical-strict", "2"),))
    report = world.verify(_cert(world, "clinical-strict", "1"), trust=trust)
    assert report.codes == ["POLICY_NOT_ACCEPTED"]
    message = report.reasons[0][1]
    assert "clinical-strict 1" in message and "clinical-strict@>=2" in message
    assert "version 2 or later" in message


BAD_SYNTAX = [
    "",
    "   ",
    "clinical-strict@",
    "clinical-strict@>=",
    "clinical-strict@>= ",
    "clinical-strict@=2",
    "clinical-strict@>2",
    "clinical-strict@==2",
    "clinical-strict@<=2",
    "clinical-strict@>=1.x",
    "clinical-strict@>=v2",
    "clinical-strict@>=-1",
    "@>=1",
    "clinical strict",
    "-clinical",
    "clinical-strict@>=1@>=2",
]


@pytest.mark.parametrize("text", BAD_SYNTAX)
def test_bad_syntax_is_a_clear_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_accepted_policy(text, "--require-policy")
    assert "--require-policy" in info.value.message
    assert info.value.hint and "ID@>=VERSION" in info.value.hint
    assert info.value.exit_code == 2


@pytest.mark.parametrize("text", ["clinical-strict@>=", "clinical-strict@>2", "a b"])
def test_bad_syntax_on_the_command_line_exits_2(
    world: World, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trust_path = save_trust_store(world.trust, world.root / "trust.yaml")
    args = ["verify", str(_cert(world)), "--trust", str(trust_path), "--artifact", str(world.onnx)]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--no-state", "--require-policy", text])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert "--require-policy" in err and "Traceback" not in out + err


def test_trust_store_list_round_trips_and_is_checked(world: World, tmp_path: Path) -> None:
    trust = replace(
        world.trust,
        accepted_policies=(AcceptedPolicy("clinical-strict", "1"), AcceptedPolicy("site-clinical")),
    )
    path = save_trust_store(trust, tmp_path / "trust.yaml")
    assert "accepted_policies:\n- clinical-strict@>=1\n- site-clinical\n" in path.read_text()
    assert load_trust_store(path).accepted_policies == trust.accepted_policies
    assert (
        load_trust_store(save_trust_store(world.trust, tmp_path / "t2.yaml")).accepted_policies
        is None
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[]", "non-empty list"),
        ("clinical-strict", "non-empty list"),
        ("[clinical-strict@>2]", "only @>=VERSION"),
        ("[clinical-strict, clinical-strict@>=2]", "names a policy twice"),
        ("[{id: clinical-strict}]", "must be a policy id"),
    ],
)
def test_bad_trust_store_list(world: World, tmp_path: Path, value: str, problem: str) -> None:
    path = save_trust_store(world.trust, tmp_path / "trust.yaml")
    path.write_text(path.read_text() + f"accepted_policies: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_trust_store(path)
    assert problem in info.value.diagnostics()
    assert "accepted_policies" in info.value.message


def _run(w: World, cert: Path, *extra: str, trust: Any = None) -> int:
    trust_path = save_trust_store(trust or w.trust, w.root / "trust.yaml")
    args = ["verify", str(cert), "--trust", str(trust_path), "--at", iso(NOW), "--no-state"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--artifact", str(w.onnx), *extra])
    return int(exit_info.value.code or 0)


def test_cli_text_names_policy_digest_and_counts(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(world, _cert(world, "research"))
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("VERIFIED: digits-cnn 1.2.0")
    assert f"  policy: research version 1 (sha256 {'c' * 64})" in out
    assert "  findings: 2 pass, 1 warn, 1 waived" in out


def test_cli_text_refusal_names_policy(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run(world, _cert(world, "research"), "--require-policy", "clinical-strict@>=1")
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("REJECTED:")
    assert "POLICY_NOT_ACCEPTED: certified under research 1;" in out
    assert "--require-policy accepts only clinical-strict@>=1" in out
    assert "  policy: research version 1" in out


def test_cli_json_names_policy_and_counts(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    trust = replace(world.trust, accepted_policies=(AcceptedPolicy("clinical-strict"),))
    code = _run(world, _cert(world, "site-clinical"), "--json", trust=trust)
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [r["code"] for r in data["reasons"]] == ["POLICY_NOT_ACCEPTED"]
    assert data["policy"]["id"] == "site-clinical"
    assert data["policy"]["digest"] == {"sha256": "c" * 64}
    assert data["verdict_counts"]["warn"] == 1
    code = _run(world, _cert(world), "--json", "--require-policy", "clinical-strict", trust=trust)
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["verified"] is True
    assert data["policy"]["id"] == "clinical-strict" and data["policy"]["version"] == "1"
