"""The write path's shortcuts give the same answers as the long way: a signature's R refused
before verification exactly as :func:`ed25519_point_problem` refuses it, or else by the
verification itself; the service-written leaf spliced around the entry's bytes equal to the
one encoded from the entry."""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

from _fake_log import make_key
from _ledger_service_kit import ORIGIN, entry, write_clients

from attest.certificate.signing import (
    ED25519_SMALL_ORDER,
    ed25519_point_problem,
    ed25519_r_refused_before_verify,
    key_id,
)
from attest.ledger.service.submission import (
    WriteRefused,
    check_write,
    load_clients,
    new_nonce,
    sign_submission,
)
from attest.ledger.writers import Writer, written_leaf_data, written_leaf_data_of

_P = 2**255 - 19


def test_r_refused_before_verify_is_the_point_check_but_the_curve_equation() -> None:
    for encoded in ED25519_SMALL_ORDER:
        assert ed25519_r_refused_before_verify(encoded)
    assert ed25519_r_refused_before_verify((_P + 2).to_bytes(32, "little"))  # y >= p
    assert ed25519_r_refused_before_verify(b"\x05" * 31)  # not 32 bytes
    off_curve = 0
    for _ in range(400):
        encoded = secrets.token_bytes(32)
        problem = ed25519_point_problem(encoded)
        if ed25519_r_refused_before_verify(encoded):
            assert problem is not None
        elif problem is not None:  # what is left to the verification: off the curve
            assert "not a point on the Ed25519 curve" in problem
            off_curve += 1
    assert off_curve > 100  # about half of random encodings are off the curve


def _write(tmp_path: Path) -> tuple[dict[str, object], object]:
    key = make_key(tmp_path, "client")
    clients = write_clients(
        tmp_path / "clients.yaml", [("infer-01", tmp_path / "client.pub", ["verified"])]
    )
    body = sign_submission(entry(), origin=ORIGIN, client="infer-01", nonce=new_nonce(), key=key)
    return body, load_clients(clients)


def test_a_write_whose_r_is_off_the_curve_is_refused_by_the_verification(tmp_path: Path) -> None:
    body, policy = _write(tmp_path)
    assert check_write(json.dumps(body).encode(), origin=ORIGIN, policy=policy)
    signature = base64.b64decode(str(body["signature"]))
    refused = 0
    for _ in range(64):  # R replaced by encodings that pass the cheap checks but are no point
        r = secrets.token_bytes(32)
        if ed25519_r_refused_before_verify(r) or ed25519_point_problem(r) is None:
            continue
        forged = {**body, "signature": base64.b64encode(r + signature[32:]).decode()}
        try:
            check_write(json.dumps(forged).encode(), origin=ORIGIN, policy=policy)
        except WriteRefused as exc:
            assert exc.code == "SIGNATURE_INVALID"
            refused += 1
        else:
            raise AssertionError("a signature with an R off the curve was accepted")
    assert refused > 10


def test_the_spliced_written_leaf_is_the_encoded_one(tmp_path: Path) -> None:
    key = make_key(tmp_path, "client")
    for item in (entry(), entry(actor='ünïcode "quoted" \\ \u2028')):
        body = sign_submission(item, origin=ORIGIN, client="c-1", nonce=new_nonce(), key=key)
        writer = Writer(
            client="c-1",
            key_id=key_id(key.public_key),
            origin=ORIGIN,
            nonce=str(body["nonce"]),
            time=str(body["time"]),
            signature=str(body["signature"]),
        )
        received = "2026-01-01T00:00:00.000001Z"
        assert written_leaf_data_of(item.leaf_data, writer, received) == written_leaf_data(
            item, writer, received
        )
