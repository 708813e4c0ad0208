"""A split view caught (issue 37, item 5). A log shows two different trees of the same size:
tree A (through one address, to an auditor) and tree B (through another, to a hospital), both
signed by its key. It asks one honest witness (a real ``attest ledger witness serve``) to
cosign both through the log-side client: A is cosigned, B refused (422, logged by the witness
as a split view). With that witness in the trust store's quorum, the auditor's audit of A
passes and the hospital's verification of B fails with WITNESS_QUORUM_NOT_MET; without a quorum
both pass, which is what a log without witnesses cannot catch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli_run import run
from _fake_log import FakeLog, make_key, serve
from _ledger_service_kit import entry
from _witness_kit import WitnessProcess, write_logs
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)

from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger.checkpoint import Checkpoint, split_note
from attest.ledger.merkle import consistency_proof
from attest.ledger.service.submission import new_nonce, sign_submission
from attest.ledger.witness.client import WitnessClient, WitnessEndpoint, witness_session
from attest.ledger.witness.cosignature import witness_key

NAME = "w.example/honest"


def _ask(process: WitnessProcess, key: Any, log: FakeLog) -> str:
    """What the log-side client gets from the witness for ``log``'s checkpoint ('' if refused)."""
    note = log.note()
    checkpoint = Checkpoint.parse_body(split_note(note)[0])

    async def prove(old: int, new: int) -> list[bytes]:
        return consistency_proof(log._read_nodes, old, new)

    async def main() -> str:
        async with witness_session() as http:
            client = WitnessClient(WitnessEndpoint("honest", process.url, key), http)
            return await client.cosign(note, checkpoint, prove) or ""

    return asyncio.run(main())


@pytest.fixture
def split(
    world: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, Any]]:
    keys = world["keys"]
    assert run(capsys, "keygen", "--out", keys / "infer")[0] == 0
    client = load_private_key(keys / "infer.key")
    log_key = make_key(keys, "log")
    logs: list[FakeLog] = []
    for _ in range(2):
        log = FakeLog(log_key)
        log.admit("infer-01", client)
        logs.append(log)

    def write(log: FakeLog, actor: str) -> None:
        body = sign_submission(
            entry(actor=actor), origin=log.origin, client="infer-01", nonce=new_nonce(), key=client
        )
        log.append_honestly(body, log.writer_key_ids["infer-01"])

    for number in range(3):  # the history both trees share
        shared = sign_submission(
            entry(actor=f"shared-{number}"), origin=logs[0].origin, client="infer-01",
            nonce=new_nonce(), key=client,
        )  # fmt: skip
        for log in logs:
            log.append_honestly(shared, log.writer_key_ids["infer-01"])
    witness_path, _, _ = generate_keypair(tmp_path / "honest", passphrase=None)
    logs_yaml = write_logs(tmp_path / "logs.yaml", keys / "log.pub", logs[0].origin)
    folder = tmp_path / "witness"
    folder.mkdir()
    process = WitnessProcess(folder, witness_path, NAME, logs_yaml, tmp_path / "witness.log")
    vkey = witness_key(NAME, load_private_key(witness_path, prompt=False))
    try:
        assert _ask(process, vkey, logs[0])  # size 3, the shared history
        write(logs[0], "auditor-sees-this")
        write(logs[1], "hospital-sees-this")
        lines = [_ask(process, vkey, log) for log in logs]
        for log, got in zip(logs, lines, strict=True):
            log.cosign = lambda note, got=got: got
        monkeypatch.setenv("ATTEST_LEDGER_SPOOL", str(tmp_path / "spool.sqlite"))
        with serve(logs[0]) as url_a, serve(logs[1]) as url_b:
            yield {
                "urls": (url_a, url_b), "lines": lines, "process": process, "vkey": vkey,
                "log_pub": keys / "log.pub", "keys": keys,
            }  # fmt: skip
    finally:
        process.stop()


def test_the_second_tree_fails_with_the_reason_and_the_refusal_is_logged(
    world: dict[str, Path],  # noqa: F811
    split: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    url_a, url_b = split["urls"]
    assert split["lines"][0] and not split["lines"][1]
    audit = ["ledger", "verify", "--key", split["log_pub"]]
    # without a witness quorum, both trees verify: each on its own is a well-signed log
    for number, url in enumerate((url_a, url_b)):
        code, out, _ = run(capsys, *audit[:2], url, *audit[2:], "--state", tmp_path / f"s{number}")
        assert code == 0, out
    with world["trust"].open("a") as fh:
        fh.write(
            f"witnesses:\n  - {{name: honest, key: '{split['vkey'].text}'}}\nwitness_quorum: 1\n"
        )
    trusted = ["--trust", world["trust"]]
    code, out, _ = run(capsys, *audit[:2], url_a, *audit[2:], *trusted, "--state", tmp_path / "a")
    assert code == 0, out
    code, out, _ = run(capsys, *audit[:2], url_b, *audit[2:], *trusted, "--state", tmp_path / "b")
    assert code == 1 and "WITNESS_QUORUM_NOT_MET" in out, out
    # the hospital's own verification against the log fails closed with the reason
    hospital = [
        "verify", world["cert"], "--trust", world["trust"], "--artifact", world["model"],
        "--ledger", url_b, "--ledger-client", "infer-01",
        "--ledger-client-key", split["keys"] / "infer.key",
        "--ledger-log-key", split["log_pub"], "--json", "--no-state",
    ]  # fmt: skip
    code, out, err = run(capsys, *hospital)
    assert code == 1 and '"WITNESS_QUORUM_NOT_MET"' in out, out + err
    split["process"].stop()
    logged = split["process"].log.read_text()
    assert "refused" in logged and "split view" in logged, logged
