"""The service collects cosignatures (issue 37, item 3), all real processes: PostgreSQL, the
service under uvicorn and two ``attest ledger witness serve``. Each write's answer carries a
checkpoint both witnesses cosigned, /checkpoint publishes it, an auditor with a 2-of-2 trust
store accepts the log; with one witness stopped the write is answered after the configured
wait with the log's own signature only (``witnessed: false``) and /checkpoint stays at the
last cosigned checkpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _cli_run import run
from _ledger_service_kit import ORIGIN, Keys, ServiceProcess, signed_body, write_clients
from _witness_kit import WitnessProcess, write_logs

from attest.certificate.signing import load_private_key, load_public_key
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.witness.cosignature import check_cosignatures, witness_key
from attest.verification.trust import add_key, empty_trust_store, save_trust_store

NAMES = ("w.example/w1", "w.example/w2")


class Witnessed:
    def __init__(self, dsn: str, tmp: Path) -> None:
        keys = Keys(tmp)
        self.log_key, self.log_pub = keys.make("ledger")
        self.infer_key, infer_pub = keys.make("infer")
        logs = write_logs(tmp / "logs.yaml", self.log_pub, ORIGIN)
        self.witnesses: list[WitnessProcess] = []
        self.policy = []
        lines = ["witnesses:"]
        for n, name in enumerate(NAMES):
            key_path, _ = keys.make(f"witness{n}")
            folder = tmp / f"w{n}"
            folder.mkdir()
            process = WitnessProcess(folder, key_path, name, logs, tmp / f"witness{n}.log")
            self.witnesses.append(process)
            vkey = witness_key(name, load_private_key(key_path, prompt=False))
            self.policy.append((f"w{n + 1}", vkey))
            lines += [f"  - name: w{n + 1}", f"    url: {process.url}", f"    key: {vkey.text}"]
        (tmp / "witnesses.yaml").write_text("\n".join(lines) + "\nquorum: 2\nwait: 5\n")
        clients = write_clients(tmp / "clients.yaml", [("infer-01", infer_pub, ["verified"])])
        self.service = ServiceProcess(
            dsn, self.log_key, clients, tmp / "service.log",
            extra_args=(
                "--witnesses", str(tmp / "witnesses.yaml"), "--static-dir", str(tmp / "static")
            ),
        )  # fmt: skip
        self.url = self.service.url
        self.static = tmp / "static" / "checkpoint"
        self.public = load_public_key(self.log_pub)
        trust = tmp / "trust.yaml"
        store, _ = add_key(
            empty_trust_store(str(trust)), self.log_pub.read_bytes(), name="log", roles=("ledger",)
        )
        save_trust_store(store, trust)
        trust.write_text(
            trust.read_text()
            + "witnesses:\n"
            + "".join(f"  - {{name: {n}, key: '{k.text}'}}\n" for n, k in self.policy)
            + "witness_quorum: 2\n"
        )
        self.trust = trust

    def stop(self) -> None:
        self.service.stop()
        for w in self.witnesses:
            w.stop()


@pytest.fixture
def witnessed(pg_dsn: str, tmp_path: Path) -> Iterator[Witnessed]:
    w = Witnessed(pg_dsn, tmp_path)
    try:
        yield w
    finally:
        w.stop()


def test_writes_are_answered_with_cosigned_checkpoints(
    witnessed: Witnessed, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for expected in range(3):
        answer = httpx.post(
            witnessed.url + "add", json=signed_body("infer-01", witnessed.infer_key), timeout=15
        ).json()
        assert answer["index"] == expected and answer["witnessed"] is True, answer
        checkpoint = open_checkpoint(answer["checkpoint"], witnessed.public)
        assert checkpoint.size > expected
        check = check_cosignatures(answer["checkpoint"], witnessed.policy)
        assert sorted(check.verified) == ["w1", "w2"]
    published = httpx.get(witnessed.url + "checkpoint", timeout=5).text
    assert sorted(check_cosignatures(published, witnessed.policy).verified) == ["w1", "w2"]
    # the static files publish only what the quorum cosigned
    deadline = time.monotonic() + 10
    while not witnessed.static.exists() or (
        open_checkpoint(witnessed.static.read_text(), witnessed.public).size < 3
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    on_disk = witnessed.static.read_text()
    assert sorted(check_cosignatures(on_disk, witnessed.policy).verified) == ["w1", "w2"]
    audit = ["ledger", "verify", witnessed.url, "--key", witnessed.log_pub]
    audit += ["--trust", witnessed.trust, "--state", tmp_path / "audit.json"]
    code, out, err = run(capsys, *audit)
    assert code == 0, out + err
    # one witness down: below the quorum, the write is answered after the wait, unwitnessed
    witnessed.witnesses[1].stop()
    started = time.monotonic()
    answer = httpx.post(
        witnessed.url + "add", json=signed_body("infer-01", witnessed.infer_key), timeout=15
    ).json()
    assert answer["index"] == 3 and answer["witnessed"] is False
    assert time.monotonic() - started >= 4.5
    assert check_cosignatures(answer["checkpoint"], witnessed.policy).verified == []
    still = httpx.get(witnessed.url + "checkpoint", timeout=5).text
    assert open_checkpoint(still, witnessed.public).size == 3
    assert open_checkpoint(witnessed.static.read_text(), witnessed.public).size == 3
    assert "1 of the 2 cosignatures needed" in witnessed.service.log.read_text()
