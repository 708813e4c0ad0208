"""Property-based: no mutation of a valid certificate verifies, and none raises anything but
our own error (the verifier reports, it does not crash)."""

from __future__ import annotations

import json

import pytest
from _certfactory import World, decode, encode, make_world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attest.errors import AttestError

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="module")
def original(world: World) -> tuple[bytes, str, list[bytes]]:
    envelope = world.envelope()
    assert world.verify(world.write(envelope, "original.json")).verified
    return decode(envelope)


def _mutate(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for position, value in edits:
        if out:
            out[position % len(out)] = value
    return bytes(out)


edits = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=4)


@SETTINGS
@given(
    target=st.sampled_from(["payload", "payloadType", "signature"]),
    edits=edits,
    truncate=st.booleans(),
)
def test_mutations_of_signed_parts_never_verify(
    world: World,
    original: tuple[bytes, str, list[bytes]],
    target: str,
    edits: list[tuple[int, int]],
    truncate: bool,
) -> None:
    payload, ptype, sigs = original
    sig = sigs[0]
    if target == "payload":
        payload = _mutate(payload, edits)[: -1 if truncate else None]
    elif target == "signature":
        sig = _mutate(sig, edits)[: -1 if truncate else None]
    else:
        mutated = _mutate(ptype.encode(), edits)
        ptype = mutated.decode("utf-8", "replace")[: -1 if truncate else None]
    if (payload, ptype, sig) == (original[0], original[1], original[2][0]):
        return  # the edits happened to write the same bytes back
    cert = world.write(encode(payload, ptype, [(world.key.keyid, sig)]), "mutated.json")
    report = world.verify(cert)
    assert not report.verified
    assert report.reasons


@SETTINGS
@given(edits=edits, cut=st.integers(0, 1 << 16))
def test_raw_file_mutations_raise_nothing_but_our_error(
    world: World, original: tuple[bytes, str, list[bytes]], edits: list[tuple[int, int]], cut: int
) -> None:
    payload, ptype, sigs = original
    raw = json.dumps(encode(payload, ptype, [(world.key.keyid, sigs[0])])).encode()
    mutated = _mutate(raw, edits)
    if cut % 3 == 0:
        mutated = mutated[: cut % (len(mutated) + 1)]
    cert = world.write(mutated, "raw.json")
    try:
        report = world.verify(cert)
    except AttestError:
        return
    if report.verified:
        # Only a change the JSON reading ignores (whitespace, an escape) may still verify:
        # the signed parts must be exactly the original ones.
        doc = json.loads(mutated)
        assert decode(doc) == (payload, ptype, [sigs[0]])
