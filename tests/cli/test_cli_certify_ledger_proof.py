"""``attest certify ... --ledger URL --ledger-proof-out FILE`` (issue 37): once the issued entry
is recorded by a real ledger service, its C2SP tlog-proof is fetched from the log's tiles and
written, and ``attest verify --ledger-proof`` accepts it with no network; an entry that could
not be recorded yet writes no proof and says how to fetch it later; usage errors exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli_run import run
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)
from test_cli_ledger_service import fleet  # noqa: F401  (a real ledger service on PostgreSQL)

from attest.cli.certify import _record_issued
from attest.cli.ledger_remote import remote_ledger
from attest.errors import LedgerError
from attest.ledger.tlog_proof import parse_tlog_proof


def test_the_offline_proof_is_written_once_the_issue_is_recorded(
    world: dict[str, Path],  # noqa: F811
    fleet: dict[str, object],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    keys, url = world["keys"], str(fleet["url"])
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    remote = remote_ledger(url, "release", keys / "release2.key", keys / "service.pub")
    proof = tmp_path / "cert.tlog-proof"
    _record_issued(url, remote, world["cert"], proof)
    assert "offline proof of entry 0 written" in capsys.readouterr().err
    assert parse_tlog_proof(proof.read_text()).index == 0
    args = ["trust", "add", keys / "service.pub", "--trust", world["trust"]]
    assert run(capsys, *args, "--name", "ledger", "--role", "ledger")[0] == 0
    verify = ["verify", world["cert"], "--trust", world["trust"], "--artifact", world["model"]]
    code, out, err = run(capsys, *verify, "--ledger-proof", proof, "--no-state")
    assert code == 0 and "offline ledger proof" in out + err, out + err
    # the service down: the issue waits in the spool, no proof is written, the hint says how
    fleet["service"].stop()  # type: ignore[attr-defined]
    later = tmp_path / "later.tlog-proof"
    with pytest.raises(LedgerError, match="not recorded in the ledger yet") as info:
        _record_issued(url, remote, world["cert"], later)
    assert f"attest ledger proof {world['cert']} --ledger {url}" in str(info.value.hint)
    assert not later.exists()


def test_usage_errors_exit_2(
    world: dict[str, Path],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    keys = world["keys"]
    certify = ["certify", world["cert"], "--policy", "research", "--key", keys / "release.key"]
    proof = ["--ledger-proof-out", tmp_path / "p.tlog-proof"]
    code, _, err = run(capsys, *certify, "--ledger", tmp_path / "local.sqlite", *proof)
    assert code == 2 and "--ledger-proof-out needs --ledger URL" in err, err
    remote = ["--ledger", "http://127.0.0.1:9/", "--ledger-client", "release"]
    remote += ["--ledger-client-key", keys / "release.key"]
    code, _, err = run(capsys, *certify, *remote, *proof)
    assert code == 2 and "--ledger-proof-out needs --ledger-log-key" in err, err
