"""Weak public keys are refused wherever keys are read, and never verify anything.

cryptography loads any 32 bytes as an Ed25519 public key; with a small-order key such as the
identity, the signature ``identity || 0^32`` verifies every message. Each row of the tables
below is a class of weak key, refused by ``attest trust add`` (exit 2, a clear message, no
traceback), by the trust store loader, by the ledger's checkpoint key readers, and (in case one
got in some other way) by :func:`attest.certificate.signing.verify_signature`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, encode, make_world, new_key
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from attest.certificate.signing import (
    ED25519_SMALL_ORDER,
    key_id,
    load_private_key,
    load_public_key_pem,
    pae,
    public_key_pem,
    verify_signature,
)
from attest.cli import main
from attest.errors import KeyError_
from attest.ledger.checkpoint import load_checkpoint_key, parse_verifier_key
from attest.verification.trust import TrustedKey, load_trust_store

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493  # order of the Ed25519 base point
ED25519_SPKI = bytes.fromhex("302a300506032b6570032100")
P256_SPKI = bytes.fromhex("301306072a8648ce3d020106082a8648ce3d030107")  # AlgorithmIdentifier
P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1
P256_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
IDENTITY = (1).to_bytes(32, "little")
FORGED = IDENTITY + bytes(32)  # R = identity, S = 0: verifies anything under a small-order key


def _le(value: int, sign: bool = False) -> bytes:
    raw = bytearray(value.to_bytes(32, "little"))
    raw[31] |= 0x80 if sign else 0
    return bytes(raw)


def _pem(der: bytes) -> str:
    body = base64.encodebytes(der).decode("ascii")
    return f"-----BEGIN PUBLIC KEY-----\n{body}-----END PUBLIC KEY-----\n"


def ed25519_pem(raw: bytes) -> str:
    return _pem(ED25519_SPKI + raw)


def p256_pem(point: bytes) -> str:
    bits = b"\x03" + bytes([len(point) + 1]) + b"\x00" + point
    inner = P256_SPKI + bits
    return _pem(b"\x30" + bytes([len(inner)]) + inner)


# The y coordinates of the points of order 8 (the other torsion points have y = 0, 1, p - 1).
Y8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022

# (name, 32-byte encoding, what the message says). The first eight are the eight points of
# small order, canonically encoded; then non-canonical encodings of them; then non-canonical
# encodings (y >= p) of an ordinary point and an encoding that is no point at all.
ED25519_WEAK: list[tuple[str, bytes, str]] = [
    ("identity", _le(1), "small order"),
    ("order2_y_minus_1", _le(P - 1), "small order"),
    ("order4_y0_x_pos", _le(0), "small order"),
    ("order4_y0_x_neg", _le(0, sign=True), "small order"),
    ("order8_a_pos", _le(Y8), "small order"),
    ("order8_a_neg", _le(Y8, sign=True), "small order"),
    ("order8_b_pos", _le(P - Y8), "small order"),
    ("order8_b_neg", _le(P - Y8, sign=True), "small order"),
    ("identity_x0_sign_set", _le(1, sign=True), "small order"),
    ("order2_x0_sign_set", _le(P - 1, sign=True), "small order"),
    ("identity_y_p_plus_1", _le(P + 1), "small order"),
    ("identity_y_p_plus_1_sign", _le(P + 1, sign=True), "small order"),
    ("order4_y_p", _le(P), "small order"),
    ("order4_y_p_sign", _le(P, sign=True), "small order"),
    ("noncanonical_y_p_plus_3", _le(P + 3), "not canonically encoded"),
    ("noncanonical_y_p_plus_18_sign", _le(P + 18, sign=True), "not canonically encoded"),
    ("noncanonical_all_ones", b"\xff" * 32, "not canonically encoded"),
    ("not_on_curve_y2", _le(2), "not a point on the Ed25519 curve"),
]
SMALL_ORDER_ROWS = [row for row in ED25519_WEAK if row[2] == "small order"]
ED25519_IDS = [row[0] for row in ED25519_WEAK]
SMALL_ORDER_IDS = [row[0] for row in SMALL_ORDER_ROWS]


def _p256_point_with_small_x() -> tuple[int, int]:
    for x in range(100):  # the smallest x on P-256 (p = 3 mod 4: sqrt is a power)
        rhs = (x**3 - 3 * x + P256_B) % P256_P
        y = pow(rhs, (P256_P + 1) // 4, P256_P)
        if y * y % P256_P == rhs:
            return x, y
    raise AssertionError("no point found")


def _p256_good() -> tuple[int, int]:
    numbers = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()
    return numbers.x, numbers.y


def _xy(x: int, y: int) -> bytes:
    return b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big")


def _p256_off_curve() -> bytes:
    x, y = _p256_good()
    return _xy(x, y ^ 1)


def _p256_x_plus_p() -> bytes:
    x, y = _p256_point_with_small_x()
    return _xy(x + P256_P, y)  # x not reduced mod p: the same point, non-canonically


# (name, SEC1 point). cryptography refuses each when loading a SubjectPublicKeyInfo.
P256_WEAK: list[tuple[str, Any]] = [
    ("off_curve", _p256_off_curve),
    ("infinity", lambda: b"\x00"),
    ("all_zero_coordinates", lambda: b"\x04" + bytes(64)),
    ("x_not_reduced", _p256_x_plus_p),
    ("short_point", lambda: b"\x04" + bytes(10)),
]


def _weak_pems() -> list[tuple[str, str, str]]:
    rows = [(name, ed25519_pem(raw), problem) for name, raw, problem in ED25519_WEAK]
    rows += [(f"p256_{name}", p256_pem(make()), "P-256 point") for name, make in P256_WEAK]
    return rows


WEAK_PEMS = _weak_pems()
IDS = [name for name, _, _ in WEAK_PEMS]


def _attest(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "internal error" not in out + err
    return code, err


# --- the weak classes are real: cryptography alone accepts them -----------------------------


def test_the_blocklist_is_the_table() -> None:
    assert {raw for _, raw, _ in SMALL_ORDER_ROWS} == ED25519_SMALL_ORDER
    assert len(ED25519_SMALL_ORDER) == 14
    assert Y8 + (P - Y8) == P


@pytest.mark.parametrize(("name", "raw", "problem"), SMALL_ORDER_ROWS, ids=SMALL_ORDER_IDS)
def test_cryptography_alone_lets_a_small_order_key_be_forged(
    name: str, raw: bytes, problem: str
) -> None:
    """Why the check is hand-written: cryptography loads the key and, for some message among
    a few fixed ones, the all-zero forgery verifies (always for the identity)."""
    key = ed25519.Ed25519PublicKey.from_public_bytes(raw)
    forged = 0
    for i in range(64):
        try:
            key.verify(FORGED, b"message %d" % i)
            forged += 1
        except InvalidSignature:
            pass
    assert forged > 0, name
    assert not any(verify_signature(key, FORGED, b"message %d" % i) for i in range(64))


# --- refused wherever a key is read ----------------------------------------------------------


@pytest.mark.parametrize(("name", "pem", "problem"), WEAK_PEMS, ids=IDS)
def test_load_public_key_pem_refuses(name: str, pem: str, problem: str) -> None:
    with pytest.raises(KeyError_, match=problem) as info:
        load_public_key_pem(pem, source="k.pub")
    assert info.value.hint
    assert "k.pub" in info.value.message


@pytest.mark.parametrize(("name", "pem", "problem"), WEAK_PEMS, ids=IDS)
def test_trust_add_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, pem: str, problem: str
) -> None:
    pub = tmp_path / "weak.pub"
    pub.write_text(pem)
    code, err = _attest(capsys, "trust", "add", pub, "--trust", tmp_path / "trust.yaml")
    assert code == 2
    assert problem in err and "hint:" in err
    assert not (tmp_path / "trust.yaml").exists()


@pytest.mark.parametrize(("name", "pem", "problem"), WEAK_PEMS, ids=IDS)
def test_trust_store_with_the_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, pem: str, problem: str
) -> None:
    good = public_key_pem(new_key().public_key)
    path = tmp_path / "trust.yaml"
    block = "".join(f"          {line}\n" for line in pem.splitlines())
    good_block = "".join(f"          {line}\n" for line in good.splitlines())
    path.write_text(
        f"version: 1\nkeys:\n  - name: good\n    pem: |\n{good_block}"
        f"  - name: weak\n    pem: |\n{block}"
    )
    with pytest.raises(KeyError_, match=problem) as info:
        load_trust_store(path)
    assert "keys[1]" in info.value.message and str(path) in info.value.message
    code, err = _attest(capsys, "trust", "list", "--trust", path)
    assert code == 2 and problem in err


def _vkey(name: str, raw: bytes) -> str:
    material = b"\x01" + raw
    kid = hashlib.sha256(name.encode() + b"\n" + material).digest()[:4]
    return f"{name}+{kid.hex()}+{base64.b64encode(material).decode()}"


@pytest.mark.parametrize(("name", "raw", "problem"), ED25519_WEAK, ids=ED25519_IDS)
def test_ledger_checkpoint_keys_refuse(tmp_path: Path, name: str, raw: bytes, problem: str) -> None:
    with pytest.raises(KeyError_, match=problem):
        parse_verifier_key(_vkey("example.org/log", raw))
    (tmp_path / "vkey").write_text(_vkey("example.org/log", raw) + "\n")
    with pytest.raises(KeyError_, match=problem) as info:
        load_checkpoint_key(tmp_path / "vkey")
    assert str(tmp_path / "vkey") in info.value.message
    (tmp_path / "key.pub").write_text(ed25519_pem(raw))
    with pytest.raises(KeyError_, match=problem):
        load_checkpoint_key(tmp_path / "key.pub")


def test_a_signing_key_with_an_off_curve_public_point_is_refused(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    numbers = private.public_key().public_numbers()
    der = private.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    mine = _xy(numbers.x, numbers.y)
    assert mine in der
    bad = der.replace(mine, _xy(numbers.x, numbers.y ^ 1))
    body = base64.encodebytes(bad).decode()
    path = tmp_path / "bad.key"
    path.write_text(f"-----BEGIN EC PRIVATE KEY-----\n{body}-----END EC PRIVATE KEY-----\n")
    with pytest.raises(KeyError_, match="cannot load private key"):
        load_private_key(path)


# --- a weak key that got in anyway verifies nothing -----------------------------------------


def _signature_under_identity(seed: bytes) -> bytes:
    """R = [s]B (an ordinary point) and S = s: valid for any message under the identity key."""
    digest = bytearray(hashlib.sha512(seed).digest()[:32])
    digest[0] &= 248
    digest[31] &= 127
    digest[31] |= 64
    s = int.from_bytes(digest, "little") % L
    r = ed25519.Ed25519PrivateKey.from_private_bytes(seed).public_key()
    raw_r = r.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw_r + s.to_bytes(32, "little")


SIGNATURES_UNDER_IDENTITY: list[tuple[str, bytes]] = [
    ("identity_r_zero_s", FORGED),
    ("ordinary_r", _signature_under_identity(b"\x07" * 32)),
    ("identity_r_non_canonical", _le(P + 1) + bytes(32)),
    ("identity_r_sign_bit", _le(1, sign=True) + bytes(32)),
]


@pytest.mark.parametrize(
    ("name", "sig"), SIGNATURES_UNDER_IDENTITY, ids=[n for n, _ in SIGNATURES_UNDER_IDENTITY]
)
def test_verify_signature_refuses_a_small_order_key(name: str, sig: bytes) -> None:
    weak = ed25519.Ed25519PublicKey.from_public_bytes(IDENTITY)
    assert not verify_signature(weak, sig, b"any payload")


@pytest.mark.parametrize(("name", "raw", "problem"), SMALL_ORDER_ROWS, ids=SMALL_ORDER_IDS)
def test_verify_signature_refuses_a_small_order_r(name: str, raw: bytes, problem: str) -> None:
    key = new_key()
    sig = key.sign(b"payload")
    assert verify_signature(key.public_key, sig, b"payload")
    assert not verify_signature(key.public_key, raw + sig[32:], b"payload")


def test_non_canonical_s_does_not_verify() -> None:
    key = new_key()
    sig = key.sign(b"payload")
    s = int.from_bytes(sig[32:], "little")
    if s + L < 2**256:
        assert not verify_signature(
            key.public_key, sig[:32] + (s + L).to_bytes(32, "little"), b"payload"
        )


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_a_forged_certificate_under_an_injected_weak_key_is_rejected(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    weak = ed25519.Ed25519PublicKey.from_public_bytes(IDENTITY)
    injected = TrustedKey(keyid=key_id(weak), name="tricked", public_key=weak)
    trust = replace(world.trust, keys=(*world.trust.keys, injected))  # bypasses the loader
    statement = json.dumps(world.statement()).encode()
    from attest.certificate.format import PAYLOAD_TYPE

    for sig in (FORGED, _signature_under_identity(b"\x09" * 32)):
        weak.verify(sig, pae(PAYLOAD_TYPE, statement))  # cryptography alone would accept it
        cert = world.write(encode(statement, PAYLOAD_TYPE, [(key_id(weak), sig)]))
        report = world.verify(cert, trust=trust, at=NOW)
        assert not report.verified
        assert report.codes[0] in ("SIGNATURE_INVALID", "UNTRUSTED_KEY"), report.reasons


# --- ordinary keys are unaffected -------------------------------------------------------------


def test_ordinary_keys_load_sign_and_verify(world: World) -> None:
    for _ in range(100):
        key = new_key()
        assert load_public_key_pem(public_key_pem(key.public_key)) == key.public_key
        assert verify_signature(key.public_key, key.sign(b"m"), b"m")
    ecdsa = new_key("ecdsa-p256")
    assert verify_signature(
        load_public_key_pem(public_key_pem(ecdsa.public_key)), ecdsa.sign(b"m"), b"m"
    )
    report = world.verify(world.write(world.envelope()))
    assert report.verified, report.reasons


def test_rfc8032_test_vector_1_verifies() -> None:
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    sig = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    key = load_public_key_pem(ed25519_pem(public))
    assert verify_signature(key, sig, b"")


def test_compressed_p256_point_is_the_same_key() -> None:
    x, y = _p256_good()
    compressed = load_public_key_pem(p256_pem(bytes([2 + (y & 1)]) + x.to_bytes(32, "big")))
    plain = load_public_key_pem(p256_pem(_xy(x, y)))
    assert key_id(compressed) == key_id(plain)


def test_the_curve_check_agrees_with_eulers_criterion() -> None:
    """The Jacobi symbol that decides "on the curve" gives Euler's criterion's answer on
    random y, on y next to 0 and p, and on points of real signatures."""
    import random

    from attest.certificate.signing import _ED25519_D, _jacobi, ed25519_point_problem

    rng = random.Random(23)
    ys = [rng.randrange(P) for _ in range(3000)] + [*range(2, 200), *range(P - 200, P - 1)]
    for y in ys:
        u, v = y * y - 1, _ED25519_D * y * y + 1
        euler = pow(u * pow(v, -1, P) % P, (P - 1) // 2, P)
        assert _jacobi(u * v, P) == {0: 0, 1: 1, P - 1: -1}[euler], y
        problem = ed25519_point_problem(_le(y))
        assert (problem == "is not a point on the Ed25519 curve") == (euler == P - 1), y
    for _ in range(50):
        key = ed25519.Ed25519PrivateKey.generate()
        assert ed25519_point_problem(key.sign(b"m")[:32]) is None
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        assert ed25519_point_problem(raw) is None
