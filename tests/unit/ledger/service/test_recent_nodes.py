"""The nodes the cosigning rounds' proofs are built from in memory (RecentNodes): what a
committed batch hands over equals what the database stores, proofs from them equal the
database's for every pair of sizes, a node not kept is a miss (never a wrong hash), and the
table stays bounded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger.checkpoint import Checkpoint, sign_checkpoint
from attest.ledger.merkle import consistency_proof, verify_consistency
from attest.ledger.service.postgres import PostgresStorage, Submission
from attest.ledger.service.recent_nodes import RecentNodes
from attest.ledger.service.witnessing import Witnessing
from attest.ledger.witness.client import WitnessingConfig


def test_a_batch_hands_over_exactly_the_nodes_it_stored_and_proofs_match(
    pg_dsn: str, tmp_path: Path
) -> None:
    key = load_private_key(generate_keypair(tmp_path / "log", passphrase=None)[0], prompt=False)

    def sign(size: int, root: bytes) -> str:
        return sign_checkpoint(Checkpoint("test.example/log", size, root), key)

    kept = RecentNodes()
    sizes = [0]
    roots: dict[int, bytes] = {}
    with PostgresStorage(pg_dsn, create=True) as pg:
        for batch in (1, 2, 5, 32, 7, 1, 200, 13):  # crossing levels and a 256-entry tile
            first = sizes[-1]
            subs = [
                Submission("c", f"{first + i:032x}", b"e%d" % (first + i)) for i in range(batch)
            ]
            _, head, _ = pg.submit(subs, sign)
            handed = pg.last_nodes
            assert [k for k, _ in handed if k[0] == 0] == [(0, first + i) for i in range(batch)]
            keys = [k for k, _ in handed]
            assert len(set(keys)) == len(keys)
            assert pg.read_nodes(keys) == [h for _, h in handed]  # what the database holds
            kept.add(handed)
            sizes.append(head.size)
            roots[head.size] = head.root
        pg.submit(subs[:1], sign)  # a replay appends nothing: nothing to hand over
        assert pg.last_nodes == []
        for old in sizes[1:]:
            for new in sizes[1:]:
                if old < new:
                    proof = consistency_proof(kept.read, old, new)
                    assert proof == consistency_proof(pg.read_nodes, old, new)
                    assert verify_consistency(old, new, roots[old], roots[new], proof)


def test_a_node_not_kept_is_a_miss_and_the_table_stays_bounded() -> None:
    kept = RecentNodes(limit=8)
    kept.add(((0, i), bytes([i]) * 32) for i in range(8))
    assert len(kept) == 8 and kept.read([(0, 7)]) == [bytes([7]) * 32]
    kept.add([((1, 3), b"\x01" * 32)])  # over the limit: the oldest half goes, the newest stay
    assert len(kept) == 4
    assert kept.read([(1, 3), (0, 7)]) == [b"\x01" * 32, bytes([7]) * 32]
    with pytest.raises(KeyError):
        kept.read([(0, 0)])


def test_a_round_proves_from_kept_nodes_first_and_from_the_database_on_a_miss() -> None:
    calls: list[tuple[int, int]] = []

    def from_database(old: int, new: int) -> list[bytes]:
        calls.append((old, new))
        return [b"db"]

    answers = {(1, 2): [b"kept"]}
    witnessing = Witnessing(
        WitnessingConfig((), quorum=1), from_database, lambda old, new: answers.get((old, new))
    )

    async def run() -> None:
        assert await witnessing._prove(1, 2) == [b"kept"]
        assert await witnessing._prove(2, 3) == [b"db"]

    asyncio.run(run())
    assert calls == [(2, 3)]
