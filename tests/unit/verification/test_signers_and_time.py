"""Signer attestations, roles and trusted time (issue 21): what is accepted, and why.

The rejections are rows of the tamper table (tests/unit/_signer_cases.py); these are the
acceptances and the rules that make them: a token's time, not the verifier's clock, judges a
key's validity window and revocation."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from _certfactory import World, make_world, sign_as, with_roles
from _signer_cases import CS, NEED_BOTH, RE
from _tsa import make_tsa, needs_openssl

from attest.certificate.signers import SignerIdentity, add_signature
from attest.errors import ConfigError, InputError
from attest.verification.trust import (
    TimestampAuthority,
    load_trust_store,
    revoke_key,
    save_trust_store,
)

LATER = datetime.now(timezone.utc) + timedelta(days=30)  # a verification long after signing


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _fresh(w: World) -> dict[str, Any]:
    """A statement valid from now for a year (tokens carry the real time)."""
    return w.statement(
        issued_at=(datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        expires_at=(LATER + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def test_both_roles_signed_and_a_key_counts_once(world: World) -> None:
    roles = {world.key.keyid: (RE, CS), world.second.keyid: (CS,)}
    trust = with_roles(world.trust, roles, requirements=NEED_BOTH)
    both = sign_as(
        world.statement(), [(world.key, RE, "authorship"), (world.second, CS, "approval")]
    )
    report = world.verify(world.write(both), trust=trust)
    assert report.verified, report.reasons
    assert [(s["name"], s["role"], s["meaning"]) for s in report.signatures] == [
        ("Dr Test release-engineer", RE, "authorship"),
        ("Dr Test clinical-safety", CS, "approval"),
    ]
    # one key holding both roles signs twice, once per meaning: it still counts once
    twice = sign_as(world.statement(), [(world.key, RE, "authorship")])
    twice = add_signature_forced(twice, world, CS, "approval")
    report = world.verify(world.write(twice, "twice.json"), trust=trust)
    assert report.codes == ["SIGNATURES_INSUFFICIENT"], report.reasons
    assert any("counts once" in note for note in report.notes)


def add_signature_forced(env: dict[str, Any], w: World, role: str, meaning: str) -> dict[str, Any]:
    """A second signature by the same key (attest cosign refuses this; an attacker would not)."""
    import base64

    from attest.certificate.signers import signature_entry
    from attest.certificate.statement import PAYLOAD_TYPE

    payload = base64.b64decode(env["payload"])
    who = SignerIdentity("Dr Same", role, meaning)
    env["signatures"].append(signature_entry(payload, PAYLOAD_TYPE, w.key, who))
    return env


def test_add_signature_refuses_a_key_already_there(world: World) -> None:
    env = sign_as(world.statement(), [(world.key, RE, "authorship")])
    with pytest.raises(InputError, match="already signed"):
        add_signature(env, world.key, SignerIdentity("A", RE, "review"))
    with pytest.raises(InputError, match="meaning"):
        SignerIdentity("A", RE, "blessing")
    with pytest.raises(InputError, match="control"):
        SignerIdentity("A\x1b[2J", RE, "review")


@needs_openssl
@pytest.mark.parametrize("stamped", [True, False])
def test_a_key_that_expired_after_the_timestamp_still_counts(world: World, stamped: bool) -> None:
    tsa = make_tsa(world.root / "tsa")
    env = sign_as(
        _fresh(world),
        [(world.key, RE, "authorship")],
        timestamper=tsa.stamp_message if stamped else None,
    )
    trust = world.with_keys(world.key, not_after=datetime.now(timezone.utc) + timedelta(days=1))
    trust = with_roles(trust, {}, timestamp_authorities=(TimestampAuthority("t", tsa.root_pem),))
    report = world.verify(world.write(env), trust=trust, at=LATER)
    if stamped:
        assert report.verified, report.reasons
        assert report.signatures[0]["timestamp_authority"] == "t"
    else:
        assert report.codes == ["UNTRUSTED_KEY"]
        assert "checked at" in report.reasons[0][1]


@needs_openssl
@pytest.mark.parametrize("stamped", [True, False])
def test_a_key_superseded_after_the_timestamp_still_counts(world: World, stamped: bool) -> None:
    tsa = make_tsa(world.root / "tsa")
    env = sign_as(
        _fresh(world),
        [(world.key, RE, "authorship")],
        timestamper=tsa.stamp_message if stamped else None,
    )
    superseded = datetime.now(timezone.utc) + timedelta(hours=1)
    trust = revoke_key(world.trust, world.key.keyid, reason="superseded", at=superseded)
    trust = with_roles(trust, {}, timestamp_authorities=(TimestampAuthority("t", tsa.root_pem),))
    report = world.verify(world.write(env), trust=trust, at=LATER)
    if stamped:
        assert report.verified, report.reasons
    else:
        assert report.codes == ["KEY_REVOKED"]
        assert "no trusted timestamp" in report.reasons[0][1]


def test_trust_store_roles_round_trip_and_refusals(world: World, tmp_path: Path) -> None:
    trust = with_roles(
        world.trust,
        {world.key.keyid: (RE,)},
        requirements=NEED_BOTH,
        revocation_roles=(CS,),
        timestamp_authorities=(TimestampAuthority("t", make_tsa(tmp_path / "tsa").root_pem),),
    )
    path = save_trust_store(trust, tmp_path / "trust.yaml")
    again = load_trust_store(path)
    assert again.requirements == NEED_BOTH and again.revocation_roles == (CS,)
    assert again.key(world.key.keyid).roles == (RE,)  # type: ignore[union-attr]
    assert [t.name for t in again.timestamp_authorities] == ["t"]
    text = path.read_text()
    for bad, message in (
        (text.replace("meaning: approval", "meaning: blessing"), "blessing"),
        (text.replace("count: 1", "count: 0", 1), "count"),
        (text.replace("-----BEGIN CERTIFICATE-----", "-----BEGIN NONSENSE-----"), "X.509"),
    ):
        path.write_text(bad)
        with pytest.raises(ConfigError, match=message):
            load_trust_store(path)


def test_signer_block_shape_is_strict(world: World) -> None:
    env = sign_as(world.statement(), [(world.key, RE, "authorship")])
    env["signatures"][0]["signer"]["extra"] = "x"
    report = world.verify(world.write(json.loads(json.dumps(env))))
    assert report.codes == ["MALFORMED"]
