"""Truncation and forged proofs: a ledger holding fewer entries than a checkpoint it signed
fails ``ledger verify``, refuses appends (an index a signature covers is never reused) and
refuses to sign; ``verify-proof --checkpoint`` always uses the auditor's checkpoint.

Two tables, each case a function: ``DAMAGE`` damages a ledger (library and CLI checked),
``PROOFS`` builds a proof and the checkpoint an auditor passes with it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from attest.certificate.signing import PrivateKey, generate_keypair, load_private_key
from attest.cli import main
from attest.errors import InputError, LedgerError
from attest.ledger import audit_ledger, open_ledger
from attest.ledger.audit import AuditReport
from attest.ledger.checkpoint import load_checkpoint_key
from attest.ledger.entries import LedgerEntry
from attest.ledger.proofs import consistency_proof_file, inclusion_proof_file, verify_proof_document

ORIGIN = "example.org/audit"


def _entry(i: int) -> LedgerEntry:
    return LedgerEntry(
        event="issued", time="2026-01-01T00:00:00Z", certificate_checked=False, actor=f"a{i}"
    )


def _build(path: Path, size: int, key: PrivateKey, *, changed: int | None = None) -> None:
    """``size`` entries (entry ``changed`` different), then a checkpoint of them."""
    with open_ledger(path, create=True) as ledger:
        for i in range(size):
            ledger.append(_entry(99 if i == changed else i))
        ledger.sign_checkpoint(key, origin=ORIGIN)


def _audit(path: Path, pub: Path | None = None) -> AuditReport:
    keys = [load_checkpoint_key(pub)] if pub else []
    with open_ledger(path) as ledger:
        return audit_ledger(ledger.storage, public_keys=keys)


def _cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """``attest ARGS...`` in process: (exit code, stdout, stderr); never a traceback."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in out + err
    return code, out, err


@pytest.fixture
def key(tmp_path: Path) -> PrivateKey:
    generate_keypair(tmp_path / "k", passphrase=None)
    return load_private_key(tmp_path / "k.key")


@pytest.fixture
def cert(tmp_path: Path) -> Path:
    """A certificate envelope `attest ledger append` records (it does not verify it)."""
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "model.onnx", "digest": {"sha256": "a" * 64}}],
        "predicateType": "https://gradient-attest.dev/certificate/v1",
        "predicate": {"certificate_id": "c-1", "model": {"name": "m", "version": "1"}},
    }
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    path = tmp_path / "cert.json"
    path.write_text(
        json.dumps(
            {"payloadType": "application/vnd.in-toto+json", "payload": payload, "signatures": []}
        )
    )
    return path


# -- damage to a ledger of 6 entries with one checkpoint of size 6 ---------------------------


def delete_last_entry(db: sqlite3.Connection, path: Path, key: PrivateKey) -> None:
    """The last entry deleted after the checkpoint covering it was signed, with its hashes."""
    db.execute("DELETE FROM leaves WHERE idx = 5")
    db.execute("DELETE FROM nodes WHERE key >> 6 > 5")


def delete_several_entries(db: sqlite3.Connection, path: Path, key: PrivateKey) -> None:
    db.execute("DELETE FROM leaves WHERE idx >= 3")
    db.execute("DELETE FROM nodes WHERE key >> 6 > 3")


def delete_checkpoint_row_with_entries(db: sqlite3.Connection, path: Path, key: PrivateKey) -> None:
    """Entries and the checkpoint row covering them: the meta copy of the note remains."""
    delete_several_entries(db, path, key)
    db.execute("DELETE FROM checkpoints")


def delete_every_checkpoint_record(db: sqlite3.Connection, path: Path, key: PrivateKey) -> None:
    """Rows and the meta copy: only the origin fixed by the first checkpoint is left."""
    delete_checkpoint_row_with_entries(db, path, key)
    db.execute("DELETE FROM meta WHERE key = 'last_checkpoint'")


def delete_unsigned_entries(db: sqlite3.Connection, path: Path, key: PrivateKey) -> None:
    """Two entries appended after the checkpoint, then deleted: the hash over them remains."""
    with open_ledger(path) as ledger:
        ledger.append(_entry(6))
        ledger.append(_entry(7))
    db.execute("DELETE FROM leaves WHERE idx >= 6")


def delete_middle_checkpoint(db: sqlite3.Connection, path: Path, key: PrivateKey) -> None:
    with open_ledger(path) as ledger:
        ledger.append(_entry(6))
        ledger.sign_checkpoint(key)
        ledger.append(_entry(7))
        ledger.sign_checkpoint(key)
    db.execute("DELETE FROM checkpoints WHERE id = 2")


@dataclass(frozen=True)
class Damage:
    tamper: Callable[[sqlite3.Connection, Path, PrivateKey], None]
    kind: str  # the problem kind ledger verify reports
    text: str  # in that problem's message
    blocks_append: bool  # an append would reuse an index a surviving signed record covers


DAMAGE = [
    Damage(delete_last_entry, "truncated", "checkpoint 1 covers 6 entries but only 5", True),
    Damage(delete_several_entries, "truncated", "checkpoint 1 covers 6 entries but only 3", True),
    Damage(
        delete_checkpoint_row_with_entries,
        "truncated",
        "the last signed checkpoint (its copy in the meta table) covers 6 entries but only 3",
        True,
    ),
    Damage(delete_every_checkpoint_record, "checkpoint", "but none is stored", False),
    Damage(delete_unsigned_entries, "deleted", "entries 6..7 is beyond the last stored", False),
    Damage(delete_middle_checkpoint, "checkpoint", "checkpoint 2 missing", False),
]


@pytest.mark.parametrize("damage", DAMAGE, ids=[d.tamper.__name__ for d in DAMAGE])
def test_damage_is_reported_and_signed_indexes_are_never_reused(
    tmp_path: Path, key: PrivateKey, cert: Path, capsys: pytest.CaptureFixture[str], damage: Damage
) -> None:
    path = tmp_path / "l.sqlite"
    _build(path, 6, key)
    report = _audit(path, tmp_path / "k.pub")
    assert report.ok and (report.signed_size, report.signed_by) == (6, "checkpoint 1")
    with sqlite3.connect(path) as db:
        damage.tamper(db, path, key)
    report = _audit(path, tmp_path / "k.pub")
    assert not report.ok
    assert any(p.kind == damage.kind and damage.text in p.message for p in report.problems), (
        report.problems
    )
    code, out, _ = _cli(capsys, "ledger", "verify", "--ledger", path, "--key", tmp_path / "k.pub")
    assert code == 1 and out.startswith("TAMPERED") and f"[{damage.kind}]" in out
    assert damage.text in out
    size = report.tree_size
    if damage.blocks_append:
        with open_ledger(path) as ledger:
            with pytest.raises(LedgerError, match=f"refusing to append.*index {size}") as caught:
                ledger.append(_entry(50))
            assert caught.value.hint and "backup" in caught.value.hint
            with pytest.raises(LedgerError, match="entries were removed"):
                ledger.sign_checkpoint(key)
            assert ledger.tree_head().size == size  # nothing was written
        code, _, err = _cli(capsys, "ledger", "append", cert, "--ledger", path)
        assert code == 2 and err.startswith("error: refusing to append") and "hint:" in err
        with open_ledger(path) as ledger:
            assert ledger.tree_head().size == size


def test_verify_reports_what_the_last_checkpoint_covers(
    tmp_path: Path, key: PrivateKey, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path, create=True) as ledger:
        ledger.append(_entry(0))
    code, out, _ = _cli(capsys, "ledger", "verify", "--ledger", path)
    assert code == 0 and "no signed checkpoint: deleted entries at the end" in out
    _build(path, 4, key)  # 5 entries now, signed
    with open_ledger(path) as ledger:
        ledger.append(_entry(5))
    code, out, _ = _cli(capsys, "ledger", "verify", "--ledger", path, "--json")
    report = json.loads(out)
    assert code == 0 and (report["signed_size"], report["signed_by"]) == (5, "checkpoint 1")
    code, out, _ = _cli(capsys, "ledger", "verify", "--ledger", path)
    assert code == 0 and "signed size 5; entries 5..5 are covered by no signature yet" in out


def test_limit_a_single_unsigned_entry_deleted_leaves_no_trace(
    tmp_path: Path, key: PrivateKey
) -> None:
    """What docs/ledger.md says cannot be detected without a later checkpoint kept elsewhere:
    the last entry, appended after the last checkpoint, completing no stored subtree."""
    path = tmp_path / "l.sqlite"
    _build(path, 4, key)
    with open_ledger(path) as ledger:
        ledger.append(_entry(4))
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM leaves WHERE idx = 4")
    report = _audit(path)
    assert report.ok and report.tree_size == report.signed_size == 4


# -- proofs and the checkpoint an auditor passes with --checkpoint ----------------------------


@dataclass(frozen=True)
class World:
    honest: Path  # 3 entries signed (cp3.txt kept by the auditor), then 6 signed
    forked: Path  # same key and origin, entry 1 rewritten, 6 entries, signed at 4 and 6
    tmp: Path


def _checkpoint_file(path: Path, ledger: Path, key: PrivateKey, origin: str = ORIGIN) -> Path:
    with open_ledger(ledger) as book:
        path.write_text(book.sign_checkpoint(key, origin=origin).note)
    return path


def _consistency(ledger: Path, out: Path, old: int, new: int) -> Path:
    with open_ledger(ledger) as book:
        document = consistency_proof_file(book.prove_consistency(old, new))
    out.write_text(json.dumps(document.model_dump(mode="json")))
    return out


@pytest.fixture
def world(tmp_path: Path, key: PrivateKey) -> World:
    honest, forked = tmp_path / "honest.sqlite", tmp_path / "forked.sqlite"
    _build(honest, 3, key)
    with open_ledger(honest) as book:
        (tmp_path / "cp3.txt").write_text(book.storage.checkpoints()[0].note)
        for i in range(3, 6):
            book.append(_entry(i))
        book.sign_checkpoint(key)
    _build(forked, 4, key, changed=1)
    with open_ledger(forked) as book:
        for i in range(4, 6):
            book.append(_entry(i))
        book.sign_checkpoint(key)
    return World(honest, forked, tmp_path)


def forked_proof_unrelated_earlier_checkpoint(w: World, key: PrivateKey) -> tuple[Path, Path]:
    """The red-team case: a forked log's proof 4 -> 6 with an honest checkpoint of size 3."""
    return _consistency(w.forked, w.tmp / "p.json", 4, 6), w.tmp / "cp3.txt"


def forked_proof_same_size_checkpoint(w: World, key: PrivateKey) -> tuple[Path, Path]:
    return _consistency(w.forked, w.tmp / "p.json", 3, 6), w.tmp / "cp3.txt"


def honest_proof_from_the_given_checkpoint(w: World, key: PrivateKey) -> tuple[Path, Path]:
    return _consistency(w.honest, w.tmp / "p.json", 3, 6), w.tmp / "cp3.txt"


def honest_proof_from_another_size(w: World, key: PrivateKey) -> tuple[Path, Path]:
    return _consistency(w.honest, w.tmp / "p.json", 4, 6), w.tmp / "cp3.txt"


def checkpoint_of_another_origin(w: World, key: PrivateKey) -> tuple[Path, Path]:
    """Same key, same entries, another log name: not the log the proof is about."""
    other = w.tmp / "other.sqlite"
    with open_ledger(other, create=True) as book:
        for i in range(3):
            book.append(_entry(i))
    cp = _checkpoint_file(w.tmp / "other-cp3.txt", other, key, "example.org/other")
    return _consistency(w.honest, w.tmp / "p.json", 3, 6), cp


def empty_checkpoint_file(w: World, key: PrivateKey) -> tuple[Path, Path]:
    (w.tmp / "empty.txt").write_text("")
    return _consistency(w.honest, w.tmp / "p.json", 3, 6), w.tmp / "empty.txt"


def inclusion_against_a_forked_checkpoint(w: World, key: PrivateKey) -> tuple[Path, Path]:
    with open_ledger(w.honest) as book:
        document = inclusion_proof_file(book.prove_inclusion(1))
    (w.tmp / "p.json").write_text(json.dumps(document.model_dump(mode="json")))
    with open_ledger(w.forked) as book:
        (w.tmp / "forked-cp6.txt").write_text(book.storage.checkpoints()[-1].note)
    return w.tmp / "p.json", w.tmp / "forked-cp6.txt"


# (builder, verified, reason code, text in its message)
PROOFS: list[tuple[Callable[[World, PrivateKey], tuple[Path, Path]], bool, str, str]] = [
    (forked_proof_unrelated_earlier_checkpoint, False, "SIZE_MISMATCH", "consistency 3 6"),
    (forked_proof_same_size_checkpoint, False, "ROOT_MISMATCH", "forked or rewritten"),
    (honest_proof_from_the_given_checkpoint, True, "", ""),
    (honest_proof_from_another_size, False, "SIZE_MISMATCH", "tree of 3 entries"),
    (checkpoint_of_another_origin, False, "ORIGIN_MISMATCH", "example.org/other"),
    (empty_checkpoint_file, False, "CHECKPOINT_MALFORMED", "given checkpoint"),
    (inclusion_against_a_forked_checkpoint, False, "PROOF_INVALID", "entry 1"),
]


@pytest.mark.parametrize(
    ("build", "verified", "code", "text"), PROOFS, ids=[p[0].__name__ for p in PROOFS]
)
def test_verify_proof_uses_the_given_checkpoint(
    world: World,
    key: PrivateKey,
    capsys: pytest.CaptureFixture[str],
    build: Callable[[World, PrivateKey], tuple[Path, Path]],
    verified: bool,
    code: str,
    text: str,
) -> None:
    proof, checkpoint = build(world, key)
    pub = world.tmp / "k.pub"
    verdict = verify_proof_document(
        proof, load_checkpoint_key(pub)[0], checkpoint_notes=[checkpoint.read_text()]
    )
    assert verdict.ok is verified, verdict.reasons
    assert verdict.details["checkpoint"] == "given"
    if not verified:
        assert verdict.reasons[0][0] == code and text in verdict.reasons[0][1], verdict.reasons
    exit_code, out, _ = _cli(
        capsys, "ledger", "verify-proof", proof, "--checkpoint", checkpoint, "--key", pub
    )
    if verified:
        assert exit_code == 0 and "VERIFIED" in out and "(your checkpoint)" in out
    else:
        assert exit_code == 1 and out.startswith("REJECTED") and f"{code}: " in out
        assert text in out


def test_forked_proof_alone_still_verifies_against_its_own_checkpoints(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --checkpoint nothing ties the proof to the auditor's log: why it is needed."""
    proof = _consistency(world.forked, world.tmp / "p.json", 4, 6)
    code, out, _ = _cli(capsys, "ledger", "verify-proof", proof, "--key", world.tmp / "k.pub")
    assert code == 0 and "VERIFIED" in out and "your checkpoint" not in out


def test_two_checkpoints_are_refused_as_bad_input(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    proof = _consistency(world.honest, world.tmp / "p.json", 3, 6)
    cp = world.tmp / "cp3.txt"
    with pytest.raises(InputError, match="2 checkpoints given") as caught:
        verify_proof_document(
            proof,
            load_checkpoint_key(world.tmp / "k.pub")[0],
            checkpoint_notes=[cp.read_text()] * 2,
        )
    assert caught.value.hint and "pass --checkpoint once" in caught.value.hint
    code, _, err = _cli(
        capsys,
        "ledger",
        "verify-proof",
        proof,
        "--checkpoint",
        cp,
        "--checkpoint",
        cp,
        "--key",
        world.tmp / "k.pub",
    )
    assert code == 2 and err.startswith("error: 2 checkpoints given")


def test_a_long_lived_writer_sees_truncation_by_another_connection(
    tmp_path: Path, key: PrivateKey
) -> None:
    """The signed size is cached per connection: another writer's checkpoint and a truncation
    back to exactly the size this writer last saw must still stop its next append."""
    path = tmp_path / "l.sqlite"
    with open_ledger(path, create=True) as writer:
        for i in range(5):
            writer.append(_entry(i))  # the writer now caches "size 5, nothing signed"
        with open_ledger(path) as other:
            other.append(_entry(5))
            other.append(_entry(6))
            other.sign_checkpoint(key)
        with sqlite3.connect(path) as db:
            db.execute("DELETE FROM leaves WHERE idx >= 5")
            db.execute("DELETE FROM nodes WHERE key >> 6 > 5")
        with pytest.raises(LedgerError, match="checkpoint 1 covers 7 entries but only 5"):
            writer.append(_entry(7))
