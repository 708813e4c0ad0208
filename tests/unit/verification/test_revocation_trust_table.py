"""Whose revocation counts (issue 33, item 10), as a table: each row a certificate revocation
signed by a key that was not valid when it signed (its window had ended or not begun, it was
itself revoked, it lacks the revoking role, its token does not verify). Such a revocation used
to be honoured; it is now ignored, the certificate verifies, and the notes say which revocation
was ignored and why (the reason code). The control rows show the token deciding: a revocation
timestamped before its key expired or was revoked still counts afterwards.

Every row runs through :func:`attest.verification.verifier.verify` and ``attest verify
--revocations --json`` (exit code, valid JSON, no traceback).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, iso, make_world, with_roles
from _signer_cases import CS
from _tsa import make_tsa, needs_openssl, serve

from attest.certificate.revocation import revocation_envelope
from attest.cli import main
from attest.verification.trust import TimestampAuthority, TrustStore, revoke_key, save_trust_store

Row = tuple[Path, dict[str, Any]]
Case = Callable[[World], Row]
LONG_AGO = datetime(2020, 1, 1, tzinfo=timezone.utc)


def _real_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _window(store: TrustStore, keyid: str, **window: Any) -> TrustStore:
    keys = tuple(replace(k, **window) if k.keyid == keyid else k for k in store.keys)
    return replace(store, keys=keys)


def _revocation(w: World, key: Any = None, *, timestamper: Any = None, role: str = CS) -> bytes:
    """The certificate's revocation, signed by ``key`` (default: the second trusted key)."""
    env = json.loads(w.root.joinpath("cert.json").read_text())
    revocation = revocation_envelope(
        env,
        key or w.second,
        reason="wrong weights",
        revoked_by="Dr Test",
        revoked_at=NOW - timedelta(hours=1),
        role=role,
        timestamper=timestamper,
    )
    return json.dumps(revocation).encode()


def _row(w: World, revocation: Callable[[], bytes], **options: Any) -> Row:
    cert = w.write(w.envelope())
    return cert, {"revocations": [("rev.json", revocation())], **options}


def _with_tsa(store: TrustStore, root: str) -> TrustStore:
    return with_roles(store, {}, timestamp_authorities=(TimestampAuthority("tsa", root),))


# ------------------------------------------------------------------ ignored revocations


def window_ended_in_2020(w: World) -> Row:
    trust = _window(w.trust, w.second.keyid, not_after=LONG_AGO)
    return _row(w, lambda: _revocation(w), trust=trust)


def window_not_begun(w: World) -> Row:
    trust = _window(w.trust, w.second.keyid, not_before=NOW + timedelta(days=30))
    return _row(w, lambda: _revocation(w), trust=trust)


def revoker_key_revoked(w: World) -> Row:
    trust = revoke_key(w.trust, w.second.keyid, reason="lost", at=NOW - timedelta(days=10))
    return _row(w, lambda: _revocation(w), trust=trust)


def revoker_key_revoked_later_but_untimestamped(w: World) -> Row:
    """Revoked only after the revocation's date: without a token nothing proves it signed
    before, so it does not count (as for a certificate's signature)."""
    trust = revoke_key(w.trust, w.second.keyid, reason="lost", at=NOW + timedelta(days=10))
    return _row(w, lambda: _revocation(w), trust=trust)


def role_not_allowed_to_revoke(w: World) -> Row:
    trust = with_roles(w.trust, {}, revocation_roles=(CS,))
    return _row(w, lambda: _revocation(w), trust=trust)


def role_held_but_window_ended(w: World) -> Row:
    trust = with_roles(w.trust, {w.second.keyid: (CS,)}, revocation_roles=(CS,))
    return _row(w, lambda: _revocation(w), trust=_window(trust, w.second.keyid, not_after=LONG_AGO))


def key_not_in_store(w: World) -> Row:
    return _row(w, lambda: _revocation(w, w.attacker))


def signature_edited(w: World) -> Row:
    def edited() -> bytes:
        env = json.loads(_revocation(w))
        sig = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
        sig[3] ^= 1
        env["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
        return json.dumps(env).encode()

    return _row(w, edited)


@needs_openssl
def timestamped_after_window_ended(w: World) -> Row:
    """Inside its window at the verification time (NOW), but the token proves the revocation
    was signed after the key's end."""
    tsa = make_tsa(w.root / "tsa")
    trust = _window(w.trust, w.second.keyid, not_after=_real_now() - timedelta(hours=1))
    return _row(
        w,
        lambda: _revocation(w, timestamper=tsa.stamp_message),
        trust=_with_tsa(trust, tsa.root_pem),
    )


@needs_openssl
def timestamped_after_compromise(w: World) -> Row:
    tsa = make_tsa(w.root / "tsa")
    trust = revoke_key(
        w.trust, w.second.keyid, reason="stolen", at=_real_now() - timedelta(hours=1)
    )
    return _row(
        w,
        lambda: _revocation(w, timestamper=tsa.stamp_message),
        trust=_with_tsa(trust, tsa.root_pem),
    )


@needs_openssl
def timestamp_by_untrusted_tsa(w: World) -> Row:
    tsa, trusted = make_tsa(w.root / "tsa"), make_tsa(w.root / "trusted", name="Trusted TSA")
    return _row(
        w,
        lambda: _revocation(w, timestamper=tsa.stamp_message),
        trust=_with_tsa(w.trust, trusted.root_pem),
    )


IGNORED: list[tuple[Case, str]] = [
    (window_ended_in_2020, "UNTRUSTED_KEY"),
    (window_not_begun, "UNTRUSTED_KEY"),
    (revoker_key_revoked, "KEY_REVOKED"),
    (revoker_key_revoked_later_but_untimestamped, "KEY_REVOKED"),
    (role_not_allowed_to_revoke, "SIGNATURES_INSUFFICIENT"),
    (role_held_but_window_ended, "UNTRUSTED_KEY"),
    (key_not_in_store, "UNTRUSTED_KEY"),
    (signature_edited, "SIGNATURE_INVALID"),
    (timestamped_after_window_ended, "UNTRUSTED_KEY"),
    (timestamped_after_compromise, "KEY_REVOKED"),
    (timestamp_by_untrusted_tsa, "TIMESTAMP_INVALID"),
]

# ------------------------------------------------------------------ revocations that count


@needs_openssl
def timestamped_before_window_ended(w: World) -> Row:
    """Verified two hours from now, after the key's end; the token shows it signed before."""
    tsa = make_tsa(w.root / "tsa")
    trust = _window(w.trust, w.second.keyid, not_after=_real_now() + timedelta(hours=1))
    return _row(
        w,
        lambda: _revocation(w, timestamper=tsa.stamp_message),
        trust=_with_tsa(trust, tsa.root_pem),
        at=_real_now() + timedelta(hours=2),
    )


@needs_openssl
def timestamped_before_compromise(w: World) -> Row:
    tsa = make_tsa(w.root / "tsa")
    trust = revoke_key(
        w.trust, w.second.keyid, reason="stolen", at=_real_now() + timedelta(hours=1)
    )
    return _row(
        w,
        lambda: _revocation(w, timestamper=tsa.stamp_message),
        trust=_with_tsa(trust, tsa.root_pem),
    )


def valid_key_untimestamped(w: World) -> Row:
    return _row(w, lambda: _revocation(w))


def revoking_role_held(w: World) -> Row:
    trust = with_roles(w.trust, {w.second.keyid: (CS,)}, revocation_roles=(CS,))
    return _row(w, lambda: _revocation(w), trust=trust)


COUNTED: list[Case] = [
    timestamped_before_window_ended,
    timestamped_before_compromise,
    valid_key_untimestamped,
    revoking_role_held,
]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _verify(w: World, cert: Path, options: dict[str, Any]) -> Any:
    options = dict(options)
    return w.verify(cert, at=options.pop("at", NOW), **options)


def _cli(w: World, cert: Path, options: dict[str, Any], capsys: Any) -> tuple[int, dict[str, Any]]:
    trust = save_trust_store(options.get("trust", w.trust), w.root / "trust.yaml")
    at = options.get("at", NOW)
    args = ["verify", str(cert), "--trust", str(trust), "--at", iso(at), "--json"]
    args += ["--artifact", str(w.onnx)]
    for index, (_, data) in enumerate(options["revocations"]):
        path = w.root / f"revocation-{index}.json"
        path.write_bytes(data)
        args += ["--revocations", str(path)]
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    code = info.value.code
    return (code if isinstance(code, int) else 0), json.loads(out)


@pytest.mark.parametrize(("case", "code"), IGNORED, ids=[c.__name__ for c, _ in IGNORED])
def test_a_revocation_by_a_key_not_valid_when_it_signed_is_ignored(
    world: World, case: Case, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, options = case(world)
    report = _verify(world, cert, options)
    assert report.verified, report.reasons
    ignored = [n for n in report.notes if n.startswith("ignored revocation rev.json")]
    assert len(ignored) == 1 and f": {code}: " in ignored[0], report.notes
    exit_code, data = _cli(world, cert, options, capsys)
    assert exit_code == 0 and data["verified"] is True
    assert any("ignored revocation" in n and f": {code}: " in n for n in data["notes"])


@pytest.mark.parametrize("case", COUNTED, ids=[c.__name__ for c in COUNTED])
def test_a_revocation_by_a_key_valid_when_it_signed_counts(
    world: World, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, options = case(world)
    report = _verify(world, cert, options)
    assert report.codes == ["CERTIFICATE_REVOKED"], (report.reasons, report.notes)
    exit_code, data = _cli(world, cert, options, capsys)
    assert exit_code == 1 and data["reasons"][0]["code"] == "CERTIFICATE_REVOKED"


@needs_openssl
def test_the_token_decides_the_untimestamped_twin_is_ignored(world: World) -> None:
    """The same revocation without its token, after the key's end: ignored."""
    cert, options = timestamped_before_window_ended(world)
    options["revocations"] = [("rev.json", _revocation(world))]
    report = _verify(world, cert, options)
    assert report.verified and any(": UNTRUSTED_KEY: " in n for n in report.notes), report.notes


@needs_openssl
def test_attest_revoke_tsa_timestamps_the_revocation(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from attest.certificate.signing import generate_keypair
    from attest.verification.trust import add_key

    tsa = make_tsa(world.root / "tsa")
    key_path, pub_path, _ = generate_keypair(world.root / "qa", passphrase=None)
    end = _real_now() + timedelta(hours=1)
    store, _ = add_key(world.trust, pub_path.read_bytes(), name="qa", not_after=end)
    cert = world.write(world.envelope())
    out = world.root / "rev.json"
    with serve(tsa) as url, pytest.raises(SystemExit) as info:
        main(["revoke", str(cert), "--key", str(key_path), "--reason", "recall", "--name",
              "Dr QA", "--tsa", url, "-o", str(out)])  # fmt: skip
    assert info.value.code == 0, capsys.readouterr()
    signer = json.loads(out.read_text())["signatures"][0]["signer"]
    assert "timestamp" in signer
    options = {
        "trust": _with_tsa(store, tsa.root_pem),
        "revocations": [("rev.json", out.read_bytes())],
        "at": _real_now() + timedelta(hours=2),  # after the key's end: the token carries it
    }
    assert _verify(world, cert, options).codes == ["CERTIFICATE_REVOKED"]
