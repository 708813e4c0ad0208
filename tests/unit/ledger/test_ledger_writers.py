"""The service-written leaf (attest.ledger.writers): the entry, its writer and the receive time
in one canonical record; every other encoding of it is refused, and the client's signature in it
verifies only for exactly that entry and request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _fake_log import make_key
from _ledger_service_kit import ORIGIN, entry

from attest.certificate.signing import key_id
from attest.errors import LedgerError
from attest.ledger.entries import entry_from_leaf_data
from attest.ledger.service.submission import new_nonce, sign_submission
from attest.ledger.writers import Writer, entry_of_leaf, read_leaf, written_leaf_data


def _leaf(tmp_path: Path) -> tuple[bytes, object, object]:
    key = make_key(tmp_path, "client")
    item = entry()
    body = sign_submission(item, origin=ORIGIN, client="infer-01", nonce=new_nonce(), key=key)
    writer = Writer(
        client="infer-01",
        key_id=key_id(key.public_key),
        origin=ORIGIN,
        nonce=body["nonce"],
        time=body["time"],
        signature=body["signature"],
    )
    return written_leaf_data(item, writer, "2026-01-01T00:00:00.000001Z"), item, key


def test_a_written_leaf_reads_back_and_its_signature_verifies(tmp_path: Path) -> None:
    data, item, key = _leaf(tmp_path)
    record = read_leaf(data)
    assert record.entry == item and entry_of_leaf(data) == item
    assert record.received == "2026-01-01T00:00:00.000001Z"
    assert record.writer is not None
    assert record.writer.verifies(key.public_key, item.leaf_data)  # type: ignore[attr-defined]
    other = entry(actor="someone-else")
    assert not record.writer.verifies(key.public_key, other.leaf_data)  # type: ignore[attr-defined]
    # a bare (v1) entry still reads, without a writer
    assert read_leaf(item.leaf_data).writer is None  # type: ignore[attr-defined]
    assert entry_of_leaf(item.leaf_data) == item  # type: ignore[attr-defined]
    with pytest.raises(LedgerError):  # the bare-entry reader does not take a written leaf
        entry_from_leaf_data(data)


# (row, how the leaf is re-encoded, the refusal)
ENCODINGS = [
    ("indented", lambda d: json.dumps(json.loads(d), indent=1).encode(), "not a valid"),
    ("a field added", lambda d: d.replace(b'"received"', b'"extra":"x","received"'), "valid"),
    ("a duplicate key", lambda d: d[:-1] + b',"received":"2026-01-01T00:00:00Z"}', "canonical"),
    ("the writer missing", lambda d: _drop(d, "writer"), "valid"),
    ("over the size limit", lambda d: d[:-1] + b" " * 70_000 + b"}", "over the"),
]


def _drop(data: bytes, key: str) -> bytes:
    leaf = json.loads(data)
    del leaf[key]
    return json.dumps(leaf, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize(("row", "change", "words"), ENCODINGS, ids=[e[0] for e in ENCODINGS])
def test_any_other_encoding_is_refused(
    tmp_path: Path, row: str, change: object, words: str
) -> None:
    data, _, _ = _leaf(tmp_path)
    with pytest.raises(LedgerError, match=words):
        read_leaf(change(data))  # type: ignore[operator]
