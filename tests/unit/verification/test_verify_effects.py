"""The order of effects of ``attest verify``: nothing is recorded (rollback state, ledger
entry) until the verdict is final and rendered; a verification that cannot reach a verdict,
for whatever cause, is recorded in the ledger as a rejection when ``--ledger`` is given.

One row per situation: what to do to the world, the exit code, whether the rollback state is
raised, and the ledger entry expected (event, reason code).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _certfactory import World, make_world, sign_raw

from attest.cli import main
from attest.ledger import open_ledger
from attest.verification.trust import save_trust_store

Setup = Callable[[World, pytest.MonkeyPatch], list[str]]


def _base(w: World, cert: Path | None = None) -> list[str]:
    trust = save_trust_store(w.trust, w.root / "trust.yaml")
    cert = cert if cert is not None else w.write(w.envelope())
    return [
        str(cert),
        "--trust",
        str(trust),
        "--artifact",
        str(w.onnx),
        "--state-file",
        str(w.root / "state.json"),
        "--ledger",
        str(w.root / "audit.sqlite"),
    ]


def verified(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    return _base(w)


def verified_json(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    return [*_base(w), "--json"]


def verified_with_a_surrogate_key_hint(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    env = w.envelope()
    env["signatures"].append({"keyid": "\udcff\x1b[2K", "sig": "A" * 86 + "=="})
    return _base(w, w.write(json.dumps(env, ensure_ascii=True).encode()))


def rejected_tampered(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    return _base(w, w.write(sign_raw(w.statement(), [w.attacker])))


def rejected_surrogate_payload_type(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    env = w.envelope()
    env["payloadType"] = "\ud800"
    return _base(w, w.write(json.dumps(env, ensure_ascii=True).encode()))


def text_rendering_crashes(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    def boom(data: dict[str, Any]) -> str:
        raise RuntimeError("renderer broke")

    mp.setattr("attest.cli.verify._render", boom)
    return _base(w)


def json_rendering_crashes(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    def boom(data: Any, **kwargs: Any) -> str:
        raise ValueError("cannot encode")

    mp.setattr("attest.cli.verify.printable_json", boom)
    return [*_base(w), "--json"]


def trust_store_missing(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    args = _base(w)
    args[args.index("--trust") + 1] = str(w.root / "absent.yaml")
    return args


def certificate_missing(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    args = _base(w)
    args[0] = str(w.root / "absent.json")
    return args


def rollback_state_unwritable(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    (w.root / "state.json.lock").mkdir()  # the lock cannot be opened as a file
    return _base(w)


def rollback_state_damaged(w: World, mp: pytest.MonkeyPatch) -> list[str]:
    (w.root / "state.json").write_text("{not json")
    return _base(w)


# (setup, exit code, rollback state raised, ledger event, reason code or None)
TABLE: list[tuple[Setup, int, bool, str, str | None]] = [
    (verified, 0, True, "verified", None),
    (verified_json, 0, True, "verified", None),
    (verified_with_a_surrogate_key_hint, 0, True, "verified", None),
    (rejected_tampered, 1, False, "rejected", "UNTRUSTED_KEY"),
    (rejected_surrogate_payload_type, 1, False, "rejected", "MALFORMED"),
    (text_rendering_crashes, 3, False, "rejected", "INTERNAL_ERROR"),
    (json_rendering_crashes, 3, False, "rejected", "INTERNAL_ERROR"),
    (trust_store_missing, 2, False, "rejected", "INPUT_ERROR"),
    (certificate_missing, 2, False, "rejected", "INPUT_ERROR"),
    (rollback_state_unwritable, 2, False, "rejected", "INPUT_ERROR"),
    (rollback_state_damaged, 2, False, "rejected", "INPUT_ERROR"),
]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


@pytest.mark.parametrize(
    ("setup", "exit_code", "raised", "event", "code"), TABLE, ids=[r[0].__name__ for r in TABLE]
)
def test_effects_follow_the_verdict(
    world: World,
    setup: Setup,
    exit_code: int,
    raised: bool,
    event: str,
    code: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ATTEST_STATE_FILE", raising=False)
    args = setup(world, monkeypatch)  # live time: --at would skip the rollback record
    try:
        main(["verify", *args])
        got = 0
    except SystemExit as exc:
        got = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert got == exit_code, out + err
    assert "Traceback" not in out + err
    state = world.root / "state.json"
    if raised:
        assert json.loads(state.read_text())["models"]["digits-cnn"]["version"] == "1.2.0"
    else:
        assert not state.exists() or "digits-cnn" not in state.read_text()
    with open_ledger(world.root / "audit.sqlite") as ledger:
        assert ledger.tree_head().size == 1  # exactly one entry, whatever happened
        _, entry = ledger.entry(0)
    assert entry.event == event
    assert entry.result == ("pass" if event == "verified" else "fail")
    if code is not None:
        assert code in entry.reason_codes, entry.reason_codes
    assert entry.certificate_checked is (code not in ("INPUT_ERROR", "INTERNAL_ERROR"))
    if exit_code >= 2:  # no verdict was shown
        assert "VERIFIED" not in out and '"verified": true' not in out
