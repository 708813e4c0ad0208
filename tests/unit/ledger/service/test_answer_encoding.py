"""A write's 200 answer is built from the checkpoint's note encoded once per checkpoint
(:func:`attest.ledger.service.app.appended_answer`): byte for byte the JSON the service wrote
for the same object before (``json.dumps``, compact, non-ASCII kept), with and without
witnesses, for a note with an em dash, newlines, quotes and backslashes."""

from __future__ import annotations

import base64
import json
import os

import pytest

from attest.ledger.service.app import appended_answer
from attest.ledger.service.sequencer import ServedCheckpoint
from attest.ledger.storage import TreeHead

NOTE = (
    'example.org/log "quoted" \\ back\n1234\nAAAA=\n\n'
    "\u2014 example.org/log abc+/=\n\u2014 w.example/w1 \u00e9\u4e2d\U0001f600\n"
)


@pytest.mark.parametrize("witnessed", [None, True, False])
def test_the_answer_is_the_json_of_its_object(witnessed: bool | None) -> None:
    served = ServedCheckpoint(NOTE, TreeHead(1235, b"\x01" * 32))
    leaf, leaf_hash = os.urandom(1500), os.urandom(32)
    body = appended_answer(1234, leaf_hash, leaf, served, witnessed)
    expected = {
        "index": 1234,
        "leaf_hash": base64.b64encode(leaf_hash).decode(),
        "leaf": base64.b64encode(leaf).decode(),
        "tree_size": 1235,
        "checkpoint": NOTE,
    }
    if witnessed is not None:
        expected["witnessed"] = witnessed
    assert body == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(body) == expected
    assert appended_answer(1234, leaf_hash, leaf, served, witnessed) == body  # cached note
