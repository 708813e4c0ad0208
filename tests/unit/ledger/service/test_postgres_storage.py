"""PostgresStorage meets the storage contract: dense indexes, the same roots and proofs as
the SQLite backend, append-only enforced by the database, no reuse of signed indexes."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from attest.certificate.signing import generate_keypair, load_private_key
from attest.errors import LedgerError
from attest.ledger.audit import audit_ledger
from attest.ledger.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from attest.ledger.log import Ledger, open_ledger
from attest.ledger.merkle import leaf_hash, root_from_leaf_hashes
from attest.ledger.service.postgres import PostgresStorage, Submission

DATAS = [f"entry {i}".encode() for i in range(300)]


def test_roots_nodes_and_proofs_match_the_sqlite_backend(pg_dsn: str, tmp_path: Path) -> None:
    with (
        PostgresStorage(pg_dsn, create=True) as pg,
        open_ledger(tmp_path / "l.sqlite", create=True) as lite,
    ):
        for chunk in (DATAS[:1], DATAS[1:7], DATAS[7:300]):
            result = pg.append_many(chunk)
            lite.storage.append_many(chunk)
        assert result.index == 299 and result.tree_size == 300
        assert pg.tree_head() == lite.tree_head()
        assert pg.tree_head().root == root_from_leaf_hashes(leaf_hash(d) for d in DATAS)
        assert list(pg.iter_nodes()) == list(lite.storage.iter_nodes())
        assert [leaf.data for leaf in pg.iter_leaves(250, 260)] == DATAS[250:260]
        book = Ledger(pg)
        assert book.prove_consistency(17, 300).proof == lite.prove_consistency(17, 300).proof


def test_tables_are_append_only_in_the_database(pg_dsn: str) -> None:
    with PostgresStorage(pg_dsn, create=True) as pg:
        pg.append_many(DATAS[:4])
    with psycopg.connect(pg_dsn, autocommit=True) as db:
        for statement in (
            "UPDATE ledger_leaves SET data = 'x' WHERE idx = 1",
            "DELETE FROM ledger_leaves WHERE idx = 3",
            "DELETE FROM ledger_nodes",
            "TRUNCATE ledger_leaves",
            "DELETE FROM ledger_submissions",
            "UPDATE ledger_checkpoints SET size = 0",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                db.execute(statement)  # type: ignore[arg-type]
        assert db.execute("SELECT count(*) FROM ledger_leaves").fetchone() == (4,)


def test_signed_indexes_are_never_reused_and_audit_finds_tampering(
    pg_dsn: str, tmp_path: Path
) -> None:
    key_path, _, _ = generate_keypair(tmp_path / "log", passphrase=None)
    key = load_private_key(key_path, prompt=False)
    with PostgresStorage(pg_dsn, create=True) as pg:
        pg.append_many(DATAS[:10])
        Ledger(pg).sign_checkpoint(key, origin="test.example/log")
        assert audit_ledger(pg, check_entries=False).ok
    with psycopg.connect(pg_dsn, autocommit=True) as db:  # a superuser bypassing the triggers
        db.execute("SET session_replication_role = replica")
        db.execute("DELETE FROM ledger_leaves WHERE idx = 9")
        db.execute("UPDATE ledger_leaves SET data = 'forged' WHERE idx = 2")
    with PostgresStorage(pg_dsn) as pg:
        with pytest.raises(LedgerError, match="reuse index 9"):
            pg.append(b"next")
        kinds = {(p.kind, p.index) for p in audit_ledger(pg, check_entries=False).problems}
        assert ("edited", 2) in kinds


def test_submissions_get_consecutive_indexes_and_replays_append_nothing(
    pg_dsn: str, tmp_path: Path
) -> None:
    key = load_private_key(generate_keypair(tmp_path / "log", passphrase=None)[0], prompt=False)

    def sign(size: int, root: bytes) -> str:
        return sign_checkpoint(Checkpoint("test.example/log", size, root), key)

    with PostgresStorage(pg_dsn, create=True) as pg:
        batch = [Submission("a", f"{i:032x}", DATAS[i]) for i in range(5)]
        outcomes, head, note = pg.submit([*batch, batch[1]], sign)
        assert [o.index for o in outcomes] == [0, 1, 2, 3, 4, 1]
        assert [o.replay for o in outcomes] == [False] * 5 + [True]
        assert head.size == 5 and open_checkpoint(note, key.public_key).size == 5
        again, head, _ = pg.submit(
            [Submission("a", f"{2:032x}", b"other"), Submission("b", f"{2:032x}", b"x")], sign
        )
        assert (again[0].replay, again[0].index) == (True, None)  # same nonce, other entry
        assert (again[1].replay, again[1].index) == (False, 5)  # nonces are per client
        assert head.size == 6


def test_a_missing_database_schema_is_refused_without_create(pg_dsn: str) -> None:
    with pytest.raises(LedgerError, match="no gradient-attest ledger"):
        PostgresStorage(pg_dsn)
