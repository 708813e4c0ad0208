"""Offline proofs (issue 37, item 4): ``attest ledger proof CERT --ledger PATH|URL`` writes a
C2SP tlog-proof@v1 and ``attest verify CERT --ledger-proof`` checks it with no network against
the trust store's ledger key and witness quorum: accepted, and each way it can be wrong
rejected with its reason code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _cli_run import run
from _fake_log import FakeLog, serve
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)

from attest.certificate.signing import load_private_key
from attest.ledger.checkpoint import split_note
from attest.ledger.entries import entry_for_certificate
from attest.ledger.tlog_proof import TLOG_PROOF_HEADER, parse_tlog_proof
from attest.ledger.witness.cosignature import cosign, witness_key


def _verify(world: dict[str, Path], proof: Path) -> list[Any]:  # noqa: F811
    return [
        "verify", world["cert"], "--trust", world["trust"], "--artifact", world["model"],
        "--ledger-proof", proof, "--no-state", "--json",
    ]  # fmt: skip


def _trust_ledger_key(world: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    args = ["trust", "add", world["keys"] / "ledger.pub", "--trust", world["trust"]]
    code, _, err = run(capsys, *args, "--name", "ledger", "--role", "ledger")
    assert code == 0, err


def test_local_ledger_proof_verifies_offline_and_each_fault_is_named(
    world: dict[str, Path],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    ledger, keys = world["ledger"], world["keys"]
    for _ in range(2):  # the certificate among other entries
        assert (
            run(
                capsys, "ledger", "append", world["cert"], "--event", "revoked", "--ledger", ledger
            )[0]
            == 0
        )
    assert run(capsys, "ledger", "append", world["cert"], "--ledger", ledger)[0] == 0
    proof = tmp_path / "cert.tlog-proof"
    code, _, err = run(capsys, "ledger", "proof", world["cert"], "--ledger", ledger, "-o", proof)
    assert code == 2 and "no signed checkpoint" in err, err
    sign = ["ledger", "checkpoint", "--key", keys / "ledger.key", "--ledger", ledger]
    assert run(capsys, *sign)[0] == 0
    assert run(capsys, "ledger", "proof", world["cert"], "--ledger", ledger, "-o", proof)[0] == 0
    text = proof.read_text()
    parsed = parse_tlog_proof(text)
    assert text.startswith(TLOG_PROOF_HEADER + "\nextra ") and parsed.index == 2
    # no ledger key in the trust store: the proof cannot be checked
    code, out, _ = run(capsys, *_verify(world, proof))
    assert code == 1 and "LEDGER_PROOF_INVALID" in out and "role ledger" in out, out
    _trust_ledger_key(world, capsys)
    code, out, err = run(capsys, *_verify(world, proof))
    assert code == 0 and "offline ledger proof" in out, out + err
    # a proof naming another index, an altered path, another format
    other = tmp_path / "other.tlog-proof"
    lines = text.split("\n")
    other.write_text(text.replace("index 2\n", "index 1\n", 1))
    code, out, _ = run(capsys, *_verify(world, other))
    assert code == 1 and "LEDGER_PROOF_INVALID" in out, out
    swapped = lines[:]
    swapped[3] = "A" * 43 + "="
    other.write_text("\n".join(swapped))
    code, out, _ = run(capsys, *_verify(world, other))
    assert code == 1 and "LEDGER_PROOF_INVALID" in out and "inclusion proof" in out, out
    other.write_text("c2sp.org/tlog-proof@v2\n" + text.split("\n", 1)[1])
    code, out, _ = run(capsys, *_verify(world, other))
    assert code == 1 and "LEDGER_PROOF_INVALID" in out, out
    # a witness quorum configured: this checkpoint was never cosigned
    wkey = load_private_key(keys / "ledger.key")  # any Ed25519 key will do for the witness
    vkey = witness_key("w.example/w1", wkey)
    with world["trust"].open("a") as fh:
        fh.write(f"witnesses:\n  - {{name: w1, key: '{vkey.text}'}}\nwitness_quorum: 1\n")
    code, out, _ = run(capsys, *_verify(world, proof))
    assert code == 1 and "WITNESS_QUORUM_NOT_MET" in out, out
    # the same proof with the witness's cosignature on its checkpoint is accepted
    note = text.split("\n\n", 1)[1]
    cosigned = tmp_path / "cosigned.tlog-proof"
    cosigned.write_text(text + cosign(split_note(note)[0], wkey, "w.example/w1"))
    code, out, _ = run(capsys, *_verify(world, cosigned))
    assert code == 0, out


def test_proof_from_a_ledger_service(
    world: dict[str, Path],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    log = FakeLog(load_private_key(world["keys"] / "ledger.key"))
    log.leaves += [entry_for_certificate(world["cert"], event="revoked").leaf_data] * 300
    log.leaves.append(entry_for_certificate(world["cert"]).leaf_data)
    proof = tmp_path / "cert.tlog-proof"
    with serve(log) as url:
        code, _, err = run(capsys, "ledger", "proof", world["cert"], "--ledger", url, "-o", proof)
        assert code == 0, err
    assert parse_tlog_proof(proof.read_text()).index == 300
    _trust_ledger_key(world, capsys)
    code, out, err = run(capsys, *_verify(world, proof))
    assert code == 0, out + err


def _bundles_read(log: FakeLog) -> list[str]:
    """Record the entry bundles the log is asked for (the paths, in order)."""
    asked: list[str] = []
    handle = log.handle

    def recording(method: str, path: str, *args: Any) -> Any:
        if path.lstrip("/").startswith("tile/entries/"):
            asked.append(path.lstrip("/"))
        return handle(method, path, *args)

    log.handle = recording  # type: ignore[method-assign]
    return asked


@pytest.mark.parametrize("stale", [False, True])
def test_proof_reads_only_the_bundle_at_the_index_given_or_spooled(
    world: dict[str, Path],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stale: bool,
) -> None:
    from attest.ledger.service.spool import Spool

    log = FakeLog(load_private_key(world["keys"] / "ledger.key"))
    revoked = entry_for_certificate(world["cert"], event="revoked")
    log.leaves += [revoked.leaf_data] * 300
    log.leaves.append(entry_for_certificate(world["cert"]).leaf_data)
    log.leaves += [revoked.leaf_data] * 300
    asked = _bundles_read(log)
    proof = tmp_path / "cert.tlog-proof"
    with serve(log) as url:
        # the index given: only its bundle is read; a wrong one fails closed
        args = ["ledger", "proof", world["cert"], "--ledger", url, "-o", proof]
        code, _, err = run(capsys, *args, "--index", "300")
        assert code == 0, err
        assert asked == ["tile/entries/001"] and parse_tlog_proof(proof.read_text()).index == 300
        code, _, err = run(capsys, *args, "--index", "5")
        assert code != 0 and "entry 5 of the log is not the 'issued' entry" in err
        # the index the spool kept for this machine's write; a stale one: searched instead
        spool_path = tmp_path / "spool.sqlite"
        monkeypatch.setenv("ATTEST_LEDGER_SPOOL", str(spool_path))
        with Spool(spool_path) as spool:
            seq = spool.enqueue(url, "release", entry_for_certificate(world["cert"]))
            spool._mark(seq, "done", 7 if stale else 300, None)
        asked.clear()
        proof.unlink()
        code, _, err = run(capsys, *args)
        assert code == 0, err
        assert parse_tlog_proof(proof.read_text()).index == 300
        if stale:  # the hint's bundle, then the search (in parallel) from the first
            assert asked[0] == "tile/entries/000" and "tile/entries/001" in asked[1:]
        else:
            assert asked == ["tile/entries/001"]
