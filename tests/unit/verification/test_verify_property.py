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


# ------------------------------------------------------------------ any text, anywhere

# Random Unicode with the characters that broke the verifier before mixed in often: lone
# surrogates, NUL, terminal escapes, carriage return, newline, bidi overrides, a BOM, C1.
_NASTY = st.sampled_from(
    [
        *("\ud800", "\udcff", "\x00", "\x1b", "\x1b[2K", "\r", "\n", "\u202e", "\u2066"),
        *("\ufeff", "\x9b", "\x7f", "=", "/", "..", "é", "\U0001f600"),
        *("9999-12-31T23:59:00Z", "9" * 30),
    ]
)
any_text = st.lists(st.one_of(_NASTY, st.characters(exclude_categories=[])), max_size=12).map(
    "".join
)

_CLI_ARGS = ("CERTIFICATE", "--trust", "--artifact", "--at", "--clock-skew", "--state-file")
_CLI_ARGS += ("--probe", "--ledger")


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from attest.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def _assert_safe(code: int, shown: str, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    assert code in allowed, shown[-2000:]
    assert "internal error" not in shown and "Traceback" not in shown
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in shown)  # encodes as UTF-8
    assert "\x1b" not in shown and "\r" not in shown and "\u202e" not in shown


@SETTINGS
@given(keyid=any_text, ptype=any_text, extra=st.booleans())
def test_any_text_in_unsigned_fields_gives_a_reason_code(
    world: World,
    original: tuple[bytes, str, list[bytes]],
    keyid: str,
    ptype: str,
    extra: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    payload, good_type, sigs = original
    env = encode(payload, good_type if extra else ptype, [(world.key.keyid, sigs[0])])
    if extra:  # an unsigned extra signature beside the valid one
        env["signatures"].append({"keyid": keyid, "sig": "A" * 86 + "=="})
    else:
        env["signatures"][0]["keyid"] = keyid
    cert = world.write(json.dumps(env, ensure_ascii=True).encode(), "unsigned.json")
    report = world.verify(cert)
    assert report.verified is (extra or ptype == good_type), report.reasons
    from attest.verification.trust import save_trust_store

    trust = save_trust_store(world.trust, world.root / "trust.yaml")
    for as_json in (False, True):
        args = ["verify", str(cert), "--trust", str(trust), "--artifact", str(world.onnx)]
        args += ["--no-state", "--at", "2026-06-01T12:00:00Z"] + (["--json"] if as_json else [])
        code, shown = _cli(args, capsys)
        _assert_safe(code, shown, (0, 1))
        if as_json:
            json.loads(shown)
    code, shown = _cli(["inspect", str(cert)], capsys)
    _assert_safe(code, shown, (0, 2))  # 2: not even an envelope (an empty payloadType)


@SETTINGS
@given(which=st.sampled_from(_CLI_ARGS), text=any_text)
def test_any_text_in_any_cli_argument_is_exit_0_1_or_2(
    world: World,
    original: tuple[bytes, str, list[bytes]],
    which: str,
    text: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from attest.verification.trust import save_trust_store

    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))  # random relative paths land here
    values = {
        "CERTIFICATE": str(world.write(world.envelope(), "cli.json")),
        "--trust": str(save_trust_store(world.trust, world.root / "trust.yaml")),
        "--artifact": str(world.onnx),
        "--at": "2026-06-01T12:00:00Z",
        "--clock-skew": "60s",
        "--state-file": str(world.root / "cli-state.json"),
        "--probe": None,
        "--ledger": None,
    }
    values[which] = text
    args = ["verify", str(values.pop("CERTIFICATE"))]
    for option, value in values.items():
        if value is not None:
            args += [option, value]
    code, shown = _cli(args, capsys)
    _assert_safe(code, shown)
    code, shown = _cli(["inspect", text], capsys)
    _assert_safe(code, shown, (2,) if which == "CERTIFICATE" else (0, 2))
