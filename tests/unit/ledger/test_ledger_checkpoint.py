"""Signed checkpoints (C2SP tlog-checkpoint + signed-note, Ed25519) and the refusal to sign a
tree inconsistent with an earlier checkpoint."""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from attest.certificate.signing import PrivateKey, generate_keypair, key_id, load_private_key
from attest.errors import KeyError_, LedgerError
from attest.ledger import merkle, open_ledger
from attest.ledger.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint_key,
    note_key_id,
    open_checkpoint,
    open_note,
    parse_verifier_key,
    sign_checkpoint,
    sign_note,
    verifier_key,
)
from attest.ledger.entries import LedgerEntry

# The reference example of golang.org/x/mod/sumdb/note (note_test.go).
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
GO_NOTE = (
    GO_TEXT
    + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def _go_private_key() -> PrivateKey:
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])[1:]
    key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    return PrivateKey(key=key, keyid=key_id(key.public_key()))


def test_go_reference_note_verifies_and_is_reproduced_byte_for_byte() -> None:
    public_key, name = parse_verifier_key(GO_VKEY)
    assert name == "PeterNeumann"
    assert open_note(GO_NOTE, public_key, name) == GO_TEXT
    key = _go_private_key()
    assert sign_note(GO_TEXT, key, "PeterNeumann") == GO_NOTE
    assert verifier_key("PeterNeumann", key.public_key) == GO_VKEY
    with pytest.raises(CheckpointError) as bad:
        open_note(GO_NOTE.replace("cryptography", "cryptographY"), public_key, name)
    assert bad.value.code == "SIGNATURE_INVALID"


def test_key_id_follows_the_signed_note_spec() -> None:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert (
        note_key_id("example.org/log", key)
        == hashlib.sha256(b"example.org/log\n\x01" + raw).digest()[:4]
    )


@pytest.fixture
def key(tmp_path: Path) -> PrivateKey:
    generate_keypair(tmp_path / "ledger", passphrase=None)
    return load_private_key(tmp_path / "ledger.key")


def test_checkpoint_note_layout(key: PrivateKey) -> None:
    root = hashlib.sha256(b"root").digest()
    note = sign_checkpoint(Checkpoint("example.org/log", 42, root), key)
    lines = note.split("\n")
    assert lines[:4] == ["example.org/log", "42", base64.b64encode(root).decode(), ""]
    dash, name, blob = lines[4].split(" ")
    assert (dash, name) == ("\u2014", "example.org/log")
    raw = base64.b64decode(blob)
    assert raw[:4] == note_key_id("example.org/log", key.public_key) and len(raw) == 4 + 64
    assert note.endswith("\n") and lines[5:] == [""]
    assert open_checkpoint(note, key.public_key) == Checkpoint("example.org/log", 42, root)


BAD_NOTES = [
    ("no blank line", lambda n: n.replace("\n\n", "\n"), "MALFORMED"),
    ("size with leading zero", lambda n: n.replace("\n42\n", "\n042\n"), "MALFORMED"),
    ("size changed", lambda n: n.replace("\n42\n", "\n43\n"), "SIGNATURE_INVALID"),
    (
        "origin changed",
        lambda n: n.replace("example.org/log\n", "example.org/lag\n", 1),
        "UNKNOWN_KEY",
    ),
    ("control character", lambda n: n.replace("42", "4\t2"), "MALFORMED"),
    ("hyphen instead of em dash", lambda n: n.replace("\u2014", "-"), "MALFORMED"),
    ("no final newline", lambda n: n[:-1], "MALFORMED"),
    ("signature not base64", lambda n: n[:-3] + "!!\n", "MALFORMED"),
    ("empty line in body", lambda n: n.replace("\n42\n", "\n\n42\n", 1), "MALFORMED"),
]


@pytest.mark.parametrize(("what", "mangle", "code"), BAD_NOTES, ids=[b[0] for b in BAD_NOTES])
def test_altered_notes_are_rejected(key: PrivateKey, what: str, mangle: object, code: str) -> None:
    note = sign_checkpoint(Checkpoint("example.org/log", 42, bytes(32)), key)
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(mangle(note), key.public_key)  # type: ignore[operator]
    assert err.value.code == code, what


def test_unknown_signatures_are_ignored_but_one_known_is_required(key: PrivateKey) -> None:
    other = _go_private_key()
    note = sign_checkpoint(Checkpoint("example.org/log", 1, bytes(32)), key)
    cosigned = note + sign_note("x\n", other, "witness.example").split("\n\n")[1]
    assert open_checkpoint(cosigned, key.public_key).size == 1
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(note, other.public_key)
    assert err.value.code == "UNKNOWN_KEY"


def test_ecdsa_keys_and_bad_origins_are_refused(tmp_path: Path) -> None:
    generate_keypair(tmp_path / "ec", algorithm="ecdsa-p256", passphrase=None)
    with pytest.raises(KeyError_, match="Ed25519"):
        sign_checkpoint(Checkpoint("o", 1, bytes(32)), load_private_key(tmp_path / "ec.key"))
    generate_keypair(tmp_path / "ed", passphrase=None)
    for origin in ("has space", "plus+sign", ""):
        with pytest.raises(LedgerError, match="origin"):
            sign_checkpoint(Checkpoint(origin, 1, bytes(32)), load_private_key(tmp_path / "ed.key"))


def test_verifier_key_files_are_accepted(tmp_path: Path, key: PrivateKey) -> None:
    (tmp_path / "vkey").write_text(verifier_key("example.org/log", key.public_key) + "\n")
    loaded, name = load_checkpoint_key(tmp_path / "vkey")
    assert name == "example.org/log" and loaded == key.public_key
    (tmp_path / "bad").write_text(GO_VKEY.replace("c74f20a3", "c74f20a4"))
    with pytest.raises(KeyError_, match="key ID"):
        load_checkpoint_key(tmp_path / "bad")
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(KeyError_):
        load_checkpoint_key(tmp_path / "junk")


# --- never sign a tree inconsistent with an earlier checkpoint -----------------------------------


def _entry(i: int) -> LedgerEntry:
    return LedgerEntry(
        event="issued", time="2026-01-01T00:00:00Z", certificate_checked=False, actor=f"a{i}"
    )


def _ledger(path: Path, size: int, changed: int | None = None) -> None:
    with open_ledger(path, create=True) as ledger:
        for i in range(size):
            ledger.append(_entry(99 if i == changed else i))


def test_checkpoints_extend_each_other(tmp_path: Path, key: PrivateKey) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path, create=True) as ledger:
        empty = ledger.sign_checkpoint(key, origin="example.org/log")
        assert (empty.size, empty.root) == (0, merkle.EMPTY_ROOT)
        for i in range(7):
            ledger.append(_entry(i))
        first = ledger.sign_checkpoint(key)
        same = ledger.sign_checkpoint(key)
        ledger.append(_entry(7))
        second = ledger.sign_checkpoint(key, previous_note=first.note)
        assert [c.size for c in ledger.storage.checkpoints()] == [0, 7, 7, 8]
        assert first.root == same.root and first.origin == "example.org/log"
        assert open_checkpoint(second.note, key.public_key).root == ledger.tree_head().root
        with pytest.raises(LedgerError, match="origin"):
            ledger.sign_checkpoint(key, origin="example.org/other")


def test_refuses_to_sign_after_history_was_rewritten(tmp_path: Path, key: PrivateKey) -> None:
    honest, forged = tmp_path / "honest.sqlite", tmp_path / "forged.sqlite"
    _ledger(honest, 10)
    with open_ledger(honest) as ledger:
        signed = ledger.sign_checkpoint(key)
    _ledger(forged, 12, changed=3)  # entry 3 rewritten, every hash recomputed, two more appended
    with sqlite3.connect(forged) as db:
        db.execute(
            "INSERT INTO checkpoints (size, root, origin, note, signed_at) VALUES (?, ?, ?, ?, ?)",
            (signed.size, signed.root, signed.origin, signed.note, signed.signed_at),
        )
        db.execute("INSERT INTO meta (key, value) VALUES ('origin', ?)", (signed.origin,))
    with open_ledger(forged) as ledger:
        with pytest.raises(LedgerError, match="refusing to sign"):
            ledger.sign_checkpoint(key)
        assert len(ledger.storage.checkpoints()) == 1  # nothing new was signed


def test_refuses_when_the_checkpoint_row_was_deleted_but_a_copy_is_kept(
    tmp_path: Path, key: PrivateKey
) -> None:
    honest, forged = tmp_path / "honest.sqlite", tmp_path / "forged.sqlite"
    _ledger(honest, 10)
    with open_ledger(honest) as ledger:
        kept = ledger.sign_checkpoint(key, origin="example.org/log").note
    _ledger(forged, 10, changed=3)
    with open_ledger(forged) as ledger:
        with pytest.raises(LedgerError, match=r"not consistent|no longer matches"):
            ledger.sign_checkpoint(key, origin="example.org/log", previous_note=kept)
        assert ledger.storage.checkpoints() == []


def test_refuses_after_truncation_edits_and_forged_checkpoints(
    tmp_path: Path, key: PrivateKey
) -> None:
    path = tmp_path / "l.sqlite"
    _ledger(path, 9)
    with open_ledger(path) as ledger:
        ledger.sign_checkpoint(key)
    with open_ledger(path) as ledger:  # an entry appended since, then edited in place
        ledger.append(_entry(9))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE leaves SET data = ? WHERE idx = 9", (_entry(77).leaf_data,))
    with open_ledger(path) as ledger, pytest.raises(LedgerError, match="do not reproduce"):
        ledger.sign_checkpoint(key)
    with sqlite3.connect(path) as db:  # the stored checkpoint note altered
        db.execute("UPDATE leaves SET data = ? WHERE idx = 9", (_entry(9).leaf_data,))
        note = db.execute("SELECT note FROM checkpoints").fetchone()[0]
        db.execute("UPDATE checkpoints SET note = ?", (note.replace("\n9\n", "\n8\n"),))
    with open_ledger(path) as ledger, pytest.raises(LedgerError, match="corrupt"):
        ledger.sign_checkpoint(key)
    with sqlite3.connect(path) as db:  # restored note, but the log truncated below it
        db.execute("UPDATE checkpoints SET note = ?", (note,))
        db.execute("DELETE FROM leaves WHERE idx >= 5")
    with open_ledger(path) as ledger, pytest.raises(LedgerError, match="removed"):
        ledger.sign_checkpoint(key)
