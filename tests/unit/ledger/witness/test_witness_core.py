"""The witness's add-checkpoint (C2SP tlog-witness) answer by answer, in process: cosigning
after a verified consistency proof, 409 with its size, 404/403/400/422, durable state, and the
refusal of a second tree of the same size logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from _witness_kit import ORIGIN, Tree, make_key, make_witness, write_logs

from attest.errors import ConfigError
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.witness.core import (
    SIZE_CONTENT_TYPE,
    Witness,
    add_checkpoint_body,
    origin_hash,
)
from attest.ledger.witness.cosignature import check_cosignatures, merge_signatures, quorum_problem
from attest.ledger.witness.logs import load_logs
from attest.ledger.witness.state import read_slots


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Tree, Path]:
    log_key, log_pub = make_key(tmp_path, "log")
    return Tree(log_key).grow(5), log_pub


def test_cosigns_first_then_consistent_growth_and_persists(
    setup: tuple[Tree, Path], tmp_path: Path
) -> None:
    tree, pub = setup
    witness = make_witness(tmp_path, pub)
    first = witness.add_checkpoint(add_checkpoint_body(0, [], tree.note()))
    assert first.status == 200 and first.body.startswith("\u2014 w.example/w1 ")
    cosigned = merge_signatures(tree.note(), first.body)
    check = check_cosignatures(cosigned, [("w1", witness.vkey)])
    assert check.verified == ["w1"] and not check.invalid
    tree.grow(8)
    grown = witness.add_checkpoint(add_checkpoint_body(5, tree.proof(5), tree.note()))
    assert grown.status == 200
    record = read_slots(tmp_path / "state" / f"{origin_hash(ORIGIN)}.state")
    assert record is not None and record[0] == 2  # the first record, then the grown one
    stored = record[2].decode()
    assert open_checkpoint(stored, tree.key.public_key).size == 13
    assert check_cosignatures(stored, [("w1", witness.vkey)]).verified == ["w1"]
    assert witness.latest(origin_hash(ORIGIN)).body == stored
    assert witness.latest("0" * 64).status == 404


def test_409_carries_the_witness_size(setup: tuple[Tree, Path], tmp_path: Path) -> None:
    tree, pub = setup
    witness = make_witness(tmp_path, pub)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note(3))).status == 200
    answer = witness.add_checkpoint(add_checkpoint_body(0, [], tree.note()))
    assert (answer.status, answer.body, answer.content_type) == (409, "3\n", SIZE_CONTENT_TYPE)
    retried = witness.add_checkpoint(add_checkpoint_body(3, tree.proof(3), tree.note()))
    assert retried.status == 200


def test_unknown_origin_bad_signature_and_malformed(
    setup: tuple[Tree, Path], tmp_path: Path
) -> None:
    tree, pub = setup
    witness = make_witness(tmp_path, pub)
    stranger_key, _ = make_key(tmp_path, "stranger")
    other_log = Tree(tree.key, origin="other.example/log").grow(2)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], other_log.note())).status == 404
    forged = Tree(stranger_key).grow(5)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], forged.note())).status == 403
    note = tree.note()
    blob_at = note.rindex(" ") + 1
    tampered = note[:blob_at] + ("A" if note[blob_at + 10] != "A" else "B") + note[blob_at + 1 :]
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tampered)).status in (400, 403)
    for body in (b"old 01\n\n" + note.encode(), b"old 0\n" + note.encode(), b"\xff\n\n"):
        assert witness.add_checkpoint(body).status == 400
    assert witness.add_checkpoint(add_checkpoint_body(9, [], note)).status == 400
    assert not (tmp_path / "state" / f"{origin_hash(ORIGIN)}.checkpoint").exists()


def test_422_cases(setup: tuple[Tree, Path], tmp_path: Path) -> None:
    tree, pub = setup
    witness = make_witness(tmp_path, pub)
    bogus = [b"\x00" * 32]
    assert witness.add_checkpoint(add_checkpoint_body(0, bogus, tree.note())).status == 422
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note(2))).status == 200
    tree.grow(3)
    assert witness.add_checkpoint(add_checkpoint_body(2, bogus, tree.note())).status == 422
    assert witness.add_checkpoint(add_checkpoint_body(2, tree.proof(2), tree.note())).status == 200


def test_split_view_refused_and_logged(
    setup: tuple[Tree, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree, pub = setup
    witness = make_witness(tmp_path, pub)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note())).status == 200
    other = Tree(tree.key, salt=b"fork").grow(5)
    with caplog.at_level(logging.WARNING, logger="attest.ledger.witness"):
        answer = witness.add_checkpoint(add_checkpoint_body(5, [], other.note()))
    assert answer.status == 422 and "split view" in answer.body
    assert any("split view" in r.getMessage() for r in caplog.records)
    # the other tree grown: its consistency proof does not start from what the witness saw
    other.grow(3)
    assert (
        witness.add_checkpoint(add_checkpoint_body(5, other.proof(5), other.note())).status == 422
    )


def test_quorum_problem_counts_distinct_known_witnesses(
    setup: tuple[Tree, Path], tmp_path: Path
) -> None:
    tree, pub = setup
    w1 = make_witness(tmp_path / "a", pub, "w.example/w1")
    w2 = make_witness(tmp_path / "b", pub, "w.example/w2")
    note = tree.note()
    one = merge_signatures(note, w1.add_checkpoint(add_checkpoint_body(0, [], note)).body)
    policy = [("w1", w1.vkey), ("w2", w2.vkey)]
    assert quorum_problem(one, policy, None) is None
    assert quorum_problem(one, policy, 1) is None
    code, message = quorum_problem(one, policy, 2) or ("", "")
    assert code == "WITNESS_QUORUM_NOT_MET" and "1 of the 2" in message
    # the same witness twice is one witness
    again = merge_signatures(one, w1.add_checkpoint(add_checkpoint_body(5, [], note)).body)
    assert quorum_problem(again, policy, 2) is not None
    both = merge_signatures(one, w2.add_checkpoint(add_checkpoint_body(0, [], note)).body)
    assert quorum_problem(both, policy, 2) is None
    # a second, failing line of a known witness makes its cosignature malformed: not counted
    forged = w1.add_checkpoint(add_checkpoint_body(5, [], note)).body
    blob = forged.split(" ")[2]
    broken = forged.replace(blob, blob[:20] + ("A" if blob[20] != "A" else "B") + blob[21:])
    check = check_cosignatures(merge_signatures(both, broken), policy)
    assert check.verified == ["w2"] and check.invalid == ["w1"]
    # a cosignature over another checkpoint text does not count
    swapped = both.replace(f"\n{tree.note().split(chr(10))[2]}\n", "\n" + "A" * 43 + "=\n", 1)
    assert quorum_problem(swapped, policy, 1) is not None


def test_logs_file_is_strict(tmp_path: Path) -> None:
    _, pub = make_key(tmp_path, "log")
    assert ORIGIN in load_logs(write_logs(tmp_path / "ok.yaml", pub))
    bad = tmp_path / "bad.yaml"
    for text in (
        "logs: []\n",
        f"logs:\n  - origin: {ORIGIN}\n    key: {pub}\n    extra: 1\n",
        f"logs:\n  - origin: a b\n    key: {pub}\n",
        f"logs:\n  - origin: {ORIGIN}\n    key: {pub}\n  - origin: {ORIGIN}\n    key: {pub}\n",
        f"logs:\n  - origin: {ORIGIN}\n    key: other.example+00000000+AAAA\n",
    ):
        bad.write_text(text)
        with pytest.raises(ConfigError):
            load_logs(bad)


def test_unreadable_state_is_never_cosigned_over(setup: tuple[Tree, Path], tmp_path: Path) -> None:
    from attest.errors import LedgerError

    tree, pub = setup
    witness = make_witness(tmp_path, pub)
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note(2))).status == 200
    (tmp_path / "state" / f"{origin_hash(ORIGIN)}.state").write_bytes(b"garbage\n" * 9000)
    with pytest.raises(LedgerError, match="cannot be read"):
        witness.add_checkpoint(add_checkpoint_body(0, [], tree.note()))


def test_state_replaced_by_another_process_is_read_again(
    setup: tuple[Tree, Path], tmp_path: Path
) -> None:
    """The witness keeps its stored checkpoint opened between rounds; a state file another
    witness process (a one-shot cosign) replaced is read and verified again, never the kept one
    used."""
    tree, pub = setup
    serving = make_witness(tmp_path, pub)
    assert serving.add_checkpoint(add_checkpoint_body(0, [], tree.note(3))).status == 200
    assert (
        serving.add_checkpoint(add_checkpoint_body(3, tree.proof(3, 4), tree.note(4))).status == 200
    )
    # another process: the same key and state folder
    other = Witness(serving.key, serving.name, serving.logs, serving.state_dir)
    assert other.add_checkpoint(add_checkpoint_body(4, tree.proof(4), tree.note())).status == 200
    stale = serving.add_checkpoint(add_checkpoint_body(4, tree.proof(4), tree.note()))
    assert (stale.status, stale.body) == (409, "5\n")
    tree.grow(3)
    grown = serving.add_checkpoint(add_checkpoint_body(5, tree.proof(5), tree.note()))
    assert grown.status == 200
