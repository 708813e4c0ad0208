"""A write counts only when proven (issue 33, item 1): each row is a service answer to
``POST /add`` that used to make the spool drop the event (or crash), reproduced against an
in-memory log and shown to leave the event pending with the reason; the honest rows show a
proven write does leave the spool."""

from __future__ import annotations

import base64
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _fake_log import FakeLog, b64, honest, make_key
from _ledger_service_kit import ORIGIN, entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attest.certificate.signing import PrivateKey, key_id
from attest.ledger.service.spool import NO_LOG_KEY, Spool

URL = "https://ledger.test/"


@dataclass
class Setup:
    log: FakeLog
    client_key: PrivateKey
    attacker: PrivateKey
    spool: Spool
    original: PrivateKey  # the log's key, as the client holds it

    @property
    def log_key(self) -> Any:
        return self.original.public_key


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    log = FakeLog(make_key(tmp_path, "log"))
    client_key = make_key(tmp_path, "client")
    log.writer_key_ids["infer-01"] = key_id(client_key.public_key)
    with Spool(tmp_path / "spool.sqlite", transport=log.transport()) as spool:
        yield Setup(log, client_key, make_key(tmp_path, "attacker"), spool, log.key)


def _flush(s: Setup, *, with_key: bool = True) -> Any:
    return s.spool.flush(
        URL,
        s.client_key,
        log_key=s.log_key if with_key else None,
        client_name="infer-01",
    )


def _states(s: Setup) -> list[str]:
    with sqlite3.connect(s.spool.path) as db:
        return [r[0] for r in db.execute("SELECT state FROM events ORDER BY seq")]


def _other_leaf(log: FakeLog, body: dict[str, Any]) -> bytes:
    other = {**body, "entry": entry(actor="someone-else").model_dump(mode="json")}
    return log.honest_leaf(other, log.writer_key_ids["infer-01"])


def _forged_writer(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    forged = {**body, "signature": b64(b"\x01" * 64)}
    leaf = log.honest_leaf(forged, log.writer_key_ids["infer-01"])
    log.leaves.append(leaf)
    return 200, {"index": len(log.leaves) - 1, "leaf": b64(leaf), "checkpoint": log.note()}


def _not_appended(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    leaf = log.honest_leaf(body, log.writer_key_ids["infer-01"])
    log.leaves.append(_other_leaf(log, body))  # the log holds something else at that index
    return 200, {"index": len(log.leaves) - 1, "leaf": b64(leaf), "checkpoint": log.note()}


def _other_origin(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    answer = log.append_honestly(body, log.writer_key_ids["infer-01"])
    log.origin = "elsewhere.example/log"
    answer["checkpoint"] = log.note()
    log.origin = ORIGIN
    return 200, answer


def _without_checkpoint(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    answer = log.append_honestly(body, log.writer_key_ids["infer-01"])
    del answer["checkpoint"]
    return 200, answer


def _leaf_of_another_entry(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    answer = log.append_honestly(body, log.writer_key_ids["infer-01"])
    answer["leaf"] = b64(_other_leaf(log, body))
    return 200, answer


# (row, what /add answers, the reason the event stays pending)
ATTACKS: list[tuple[str, Any, str]] = [
    ("200 without a checkpoint", _without_checkpoint, "carries no signed checkpoint"),
    (
        "409 with a made-up index",
        lambda log, body: (409, {"error": "REPLAY", "message": "seen", "index": 41}),
        "carries no signed checkpoint",
    ),
    ("an empty object", lambda log, body: (200, {}), "names no entry index"),
    ("a string index", lambda log, body: (200, {"index": "abc"}), "names no entry index"),
    ("a boolean index", lambda log, body: (200, {"index": True}), "names no entry index"),
    ("not JSON", lambda log, body: (200, b"recorded"), "not JSON"),
    ("a JSON list", lambda log, body: (200, [1, 2]), "expected a JSON object"),
    (
        "the index past the checkpoint",
        lambda log, body: (200, {"index": 7, "checkpoint": log.note()}),
        "not covered by the checkpoint",
    ),
    ("a checkpoint of another origin", _other_origin, "not 'test.example/ledger'"),
    ("the leaf of another entry", _leaf_of_another_entry, "holds another entry"),
    ("a writer signature that is not the client's", _forged_writer, "not written by this client"),
    ("a leaf the log does not hold", _not_appended, "is not proven in the signed checkpoint"),
    (
        "a leaf that is not base64",
        lambda log, body: (
            200,
            {**log.append_honestly(body, log.writer_key_ids["infer-01"]), "leaf": "%%"},
        ),
        "not a ledger leaf",
    ),
]


@pytest.mark.parametrize(("row", "behaviour", "reason"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_an_answer_that_proves_nothing_keeps_the_event(
    setup: Setup, row: str, behaviour: Any, reason: str
) -> None:
    setup.spool.enqueue(URL, "infer-01", entry())
    setup.log.add = behaviour
    result = _flush(setup)
    assert result.submitted == [] and result.refused == [] and result.pending == 1, row
    assert len(result.unproven) == 1 and reason in result.unproven[0][1], result.unproven
    assert _states(setup) == ["pending"]
    # the same event is proven once the service answers honestly
    setup.log.add = honest
    setup.log.nonces.clear()
    result = _flush(setup)
    assert [seq for seq, _ in result.submitted] == [1] and result.pending == 0, result
    assert _states(setup) == ["done"]


def test_a_checkpoint_signed_by_another_key_proves_nothing(setup: Setup) -> None:
    def wrong_key(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
        answer = log.append_honestly(body, log.writer_key_ids["infer-01"])
        answer["checkpoint"] = log.note(key=setup.attacker)
        return 200, answer

    setup.spool.enqueue(URL, "infer-01", entry())
    setup.log.add = wrong_key
    result = _flush(setup)
    assert result.pending == 1 and "does not verify under the log key" in result.unproven[0][1]


def test_a_log_whose_own_checkpoint_is_signed_by_another_key_proves_nothing(
    setup: Setup,
) -> None:
    setup.spool.enqueue(URL, "infer-01", entry())
    setup.log.key = setup.attacker  # the whole log is someone else's
    result = _flush(setup)
    assert result.submitted == [] and result.pending == 1
    assert "does not verify under the log key" in result.unproven[0][1]


def test_a_checkpoint_inconsistent_with_the_last_seen_is_refused(setup: Setup) -> None:
    log = setup.log
    setup.spool.enqueue(URL, "infer-01", entry(actor="first"))
    assert _flush(setup).pending == 0  # seen: the honest log of one entry
    # the service forks: it rewrites entry 0 and answers from the rewritten tree
    log.leaves[0] = _other_leaf(log, {**_body_of(log), "nonce": "ab" * 16})
    setup.spool.enqueue(URL, "infer-01", entry(actor="second"))
    result = _flush(setup)
    assert result.pending == 1 and "does not extend the one of 1" in result.unproven[0][1]


def _body_of(log: FakeLog) -> dict[str, Any]:
    """A request body like the one that wrote leaf 0 (its writer's fields)."""
    import json

    leaf = json.loads(log.leaves[0])
    writer = leaf["writer"]
    return {
        "client": writer["client"],
        "origin": writer["origin"],
        "nonce": writer["nonce"],
        "time": writer["time"],
        "signature": writer["signature"],
        "entry": leaf["entry"],
    }


def test_two_checkpoints_of_one_size_must_agree(setup: Setup) -> None:
    log = setup.log
    setup.spool.enqueue(URL, "infer-01", entry(actor="first"))
    assert _flush(setup).pending == 0
    honest_note = log.note()

    def same_size_other_root(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
        log.leaves[0] = log.honest_leaf(body, log.writer_key_ids["infer-01"])
        return 200, {
            "index": 0,
            "leaf": base64.b64encode(log.leaves[0]).decode(),
            "checkpoint": log.note(),
        }

    log.add = same_size_other_root
    setup.spool.enqueue(URL, "infer-01", entry(actor="second"))
    result = _flush(setup)
    assert log.note() != honest_note
    assert result.pending == 1 and "a forked log" in result.unproven[0][1]


def test_without_the_log_key_a_write_is_submitted_not_proven(setup: Setup) -> None:
    setup.spool.enqueue(URL, "infer-01", entry())
    result = _flush(setup, with_key=False)
    assert result.submitted == [] and result.pending == 1
    assert result.unproven == [(1, NO_LOG_KEY)]
    assert len(setup.log.leaves) == 1  # it did reach the log
    # a flush with the key proves it: the service answers 409 with the stored entry
    result = _flush(setup)
    assert result.submitted == [(1, 0)] and result.pending == 0
    assert len(setup.log.leaves) == 1


def test_a_proven_write_leaves_the_spool_and_the_checkpoint_is_kept(setup: Setup) -> None:
    for n in range(3):
        setup.spool.enqueue(URL, "infer-01", entry(actor=f"a{n}"))
    result = _flush(setup)
    assert result.submitted == [(1, 0), (2, 1), (3, 2)] and result.unproven == []
    seen = setup.spool.seen(setup.log_key, None)
    assert seen == setup.log.note(3)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=40),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_ANSWERS = st.one_of(
    _VALUES,
    st.fixed_dictionaries(
        {},
        optional={
            "index": _VALUES,
            "leaf": st.one_of(_VALUES, st.binary(max_size=64).map(b64)),
            "checkpoint": st.one_of(_VALUES, st.just("x\n1\nAAAA\n\n— x abc\n")),
            "error": _VALUES,
        },
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(status=st.sampled_from([200, 201, 409]), answer=_ANSWERS)
def test_no_hostile_answer_shape_counts_or_crashes(setup: Setup, status: int, answer: Any) -> None:
    setup.spool.enqueue(URL, "infer-01", entry())
    setup.log.add = lambda log, body: (status, answer)
    result = _flush(setup)  # never an exception that is not an AttestError
    # nothing counts as recorded: pending (not proven), or refused (a 4xx, kept and reported)
    assert result.submitted == [] and "done" not in _states(setup)
    assert result.pending + len(result.refused) >= 1
