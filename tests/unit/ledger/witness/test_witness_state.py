"""The witness's two-slot state file (:mod:`attest.ledger.witness.state`): records alternate
slots and are written in place; a torn newer record leaves the previous one standing (and the
witness refuses a proof from the torn size); no intact slot is unreadable, never empty; a state
kept by a witness before the slot file is read, continued from and then removed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _witness_kit import ORIGIN, Tree, make_key, make_witness

from attest.errors import LedgerError
from attest.ledger.witness.core import Witness, add_checkpoint_body, origin_hash
from attest.ledger.witness.state import (
    SLOT_BYTES,
    StateUnreadable,
    read_slots,
    write_slot,
)


def test_records_alternate_slots_in_place(tmp_path: Path) -> None:
    path = tmp_path / "s.state"
    assert read_slots(path) is None
    write_slot(path, 1, b"first")
    inode = path.stat().st_ino
    write_slot(path, 2, b"second")
    write_slot(path, 3, b"third")
    assert path.stat().st_ino == inode  # written in place, not replaced
    assert path.stat().st_size == 2 * SLOT_BYTES
    record = read_slots(path)
    assert record is not None and (record[0], record[2]) == (3, b"third")
    with path.open("rb") as handle:  # slot 0 still holds record 2
        handle.seek(SLOT_BYTES * 0 + 52)
        assert handle.read(6) == b"second"


def test_a_torn_record_leaves_the_previous_one(tmp_path: Path) -> None:
    path = tmp_path / "s.state"
    write_slot(path, 1, b"one")
    write_slot(path, 2, b"two, the newer")
    with open(path, "r+b") as handle:  # record 2 (slot 0) torn: its note half written
        handle.seek(52 + 5)
        handle.write(b"\0" * 4)
    record = read_slots(path)
    assert record is not None and (record[0], record[2]) == (1, b"one")
    with open(path, "r+b") as handle:  # and record 1 damaged too: nothing intact
        handle.seek(SLOT_BYTES + 52)
        handle.write(b"X")
    with pytest.raises(StateUnreadable, match="no intact record"):
        read_slots(path)


def test_the_witness_never_cosigns_over_a_torn_state(tmp_path: Path) -> None:
    log_key, log_pub = make_key(tmp_path, "log")
    tree = Tree(log_key).grow(3)
    witness = make_witness(tmp_path, log_pub)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note(2))).status == 200
    assert (
        witness.add_checkpoint(add_checkpoint_body(2, tree.proof(2, 3), tree.note())).status == 200
    )
    path = tmp_path / "state" / f"{origin_hash(ORIGIN)}.state"
    with open(path, "r+b") as handle:  # the record of size 3 (slot 0) torn by a crash
        handle.seek(60)
        handle.write(b"\xff")
    tree.grow(2)
    refused = witness.add_checkpoint(add_checkpoint_body(3, tree.proof(3), tree.note()))
    assert (refused.status, refused.body) == (409, "2\n")  # it stands at size 2 again
    for slot in range(2):  # both records damaged: refused with the reason, never empty
        with open(path, "r+b") as handle:
            handle.seek(slot * SLOT_BYTES)
            handle.write(b"garbage!")
    with pytest.raises(LedgerError, match="cannot be read: no intact record"):
        witness.add_checkpoint(add_checkpoint_body(0, [], tree.note()))


def test_a_legacy_state_is_continued_from_then_removed(tmp_path: Path) -> None:
    log_key, log_pub = make_key(tmp_path, "log")
    tree = Tree(log_key).grow(4)
    witness = make_witness(tmp_path, log_pub)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note(4))).status == 200
    state = tmp_path / "state" / f"{origin_hash(ORIGIN)}.state"
    record = read_slots(state)
    assert record is not None
    legacy = tmp_path / "state" / f"{origin_hash(ORIGIN)}.checkpoint"
    legacy.write_bytes(record[2])  # as a witness before the slot file left it
    os.unlink(state)
    restarted = Witness(witness.key, witness.name, witness.logs, witness.state_dir)
    tree.grow(3)
    stale = restarted.add_checkpoint(add_checkpoint_body(0, [], tree.note()))
    assert (stale.status, stale.body) == (409, "4\n")  # the legacy state is the witness's
    grown = restarted.add_checkpoint(add_checkpoint_body(4, tree.proof(4), tree.note()))
    assert grown.status == 200
    assert not legacy.exists()
    record = read_slots(state)
    assert record is not None and record[0] == 1 and b"\n7\n" in record[2]
