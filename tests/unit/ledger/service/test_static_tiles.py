"""Static tiles (issue 37): ``attest ledger serve --static-dir DIR`` writes the checkpoint, hash
tiles and entry bundles as immutable files in the C2SP tlog-tiles layout; a real nginx serves
that directory while writes go to the service, and ``attest ledger verify URL`` audits the log
through nginx alone (the service stopped: no read reaches it or PostgreSQL), as ``verify
--ledger URL --ledger-tiles NGINX`` reads the log's revocations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from _cli_run import run
from _ledger_service_kit import Keys, ServiceProcess, signed_body, write_clients
from _nginx_kit import NginxProcess, require_nginx

from attest.certificate.signing import load_public_key
from attest.cli.ledger_remote import remote_copy_path, remote_ledger, remote_revocations
from attest.ledger import open_ledger
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.service.static_tiles import new_tiles
from attest.ledger.service.tiles import TilePath, tiles_for_size

ENTRIES = 260  # one full level-0 tile, one partial (width 4), a partial level-1 tile (width 1)


def _all_tiles(size: int) -> set[TilePath]:
    found: set[TilePath] = set()
    level = 0
    while size >> (8 * level):
        found |= set(tiles_for_size(size, level))
        level += 1
    return found


@pytest.mark.parametrize(
    ("old", "new"), [(0, 1), (0, 256), (1, 256), (255, 257), (256, 70_000), (69_999, 70_000)]
)
def test_new_tiles_are_what_the_grown_tree_adds(old: int, new: int) -> None:
    added = list(new_tiles(old, new))
    assert len(added) == len(set(added))
    assert set(added) == _all_tiles(new) - _all_tiles(old)


def test_new_tiles_of_the_spec_example() -> None:
    # tlog-tiles: 70,000 entries are 273 full level-0 tiles, a partial one of width 112, one
    # full level-1 tile, a partial one of width 17 and a partial level-2 tile of width 1
    tiles = list(new_tiles(0, 70_000))
    assert len(tiles) == 273 + 1 + 1 + 1 + 1
    assert TilePath(0, 273, 112) in tiles and TilePath(1, 1, 17) in tiles
    assert TilePath(2, 0, 1) in tiles and TilePath(1, 0, 256) in tiles


class Static:
    def __init__(self, dsn: str, tmp: Path) -> None:
        require_nginx()
        keys = Keys(tmp)
        self.log_key, self.log_pub = keys.make("ledger")
        self.infer_key, infer_pub = keys.make("infer")
        clients = write_clients(tmp / "clients.yaml", [("infer-01", infer_pub, ["verified"])])
        self.root = tmp / "static"
        self.service = ServiceProcess(
            dsn, self.log_key, clients, tmp / "service.log",
            extra_args=("--static-dir", str(self.root)),
        )  # fmt: skip
        self.nginx = NginxProcess(self.root, tmp / "nginx")
        self.public = load_public_key(self.log_pub)

    def static_size(self) -> int:
        """The size of the checkpoint nginx serves; -1 before the first is written."""
        answer = httpx.get(self.nginx.url + "checkpoint", timeout=5)
        if answer.status_code == 404:
            return -1
        return open_checkpoint(answer.text, self.public).size

    def stop(self) -> None:
        self.nginx.stop()
        self.service.stop()


@pytest.fixture
def static(pg_dsn: str, tmp_path: Path) -> Iterator[Static]:
    s = Static(pg_dsn, tmp_path)
    try:
        yield s
    finally:
        s.stop()


def _write(static: Static, count: int) -> None:
    bodies = [signed_body("infer-01", static.infer_key) for _ in range(count)]

    def post(body: object) -> int:
        return httpx.post(static.service.url + "add", json=body, timeout=15).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(post, bodies)) == {200}


def _wait_static(static: Static, size: int) -> None:
    deadline = time.monotonic() + 30
    while static.static_size() < size:
        assert time.monotonic() < deadline, "the static checkpoint did not reach the log's size"
        time.sleep(0.05)


def test_ledger_verify_audits_through_nginx(
    static: Static,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _wait_static(static, 0)  # an empty log's checkpoint is published at start
    assert static.static_size() == 0
    _write(static, ENTRIES)
    _wait_static(static, ENTRIES)
    # the files are the service's tiles, byte for byte, at the tlog-tiles paths
    for path in ("tile/0/000", "tile/0/001.p/4", "tile/entries/000", "tile/entries/001.p/4",
                 "tile/1/000.p/1", "clients", "clients-version/1"):  # fmt: skip
        through_nginx = httpx.get(static.nginx.url + path, timeout=5)
        assert through_nginx.status_code == 200, path
        assert through_nginx.content == httpx.get(static.service.url + path, timeout=5).content
    assert (static.root / "tile/0/000").stat().st_size == 256 * 32
    checkpoint = httpx.get(static.nginx.url + "checkpoint", timeout=5)
    assert checkpoint.headers["content-type"] == "text/plain; charset=utf-8"
    assert checkpoint.headers["cache-control"] == "no-cache"
    # reads need neither the service nor its database: stop the service, audit through nginx
    static.service.stop()
    state = tmp_path / "audit.json"
    audit = ["ledger", "verify", static.nginx.url, "--key", static.log_pub, "--state", state]
    code, out, err = run(capsys, *audit)
    assert code == 0, out + err
    assert f"OK: {static.nginx.url}" in out and f"{ENTRIES} of {ENTRIES} entries" in out
    assert f"{ENTRIES} client signatures checked" in out
    # verify --ledger SERVICE --ledger-tiles NGINX: the log's revocations read through nginx
    monkeypatch.setenv("ATTEST_LEDGER_SPOOL", str(tmp_path / "spool.sqlite"))
    remote = remote_ledger(
        static.service.url, "infer-01", static.infer_key, static.log_pub, static.nginx.url
    )
    assert remote_revocations(remote) == ([], None, None)
    with open_ledger(remote_copy_path(static.service.url)) as copy:
        assert copy.storage.tree_head().size == ENTRIES
    # an entry edited in the served files is caught
    bundle = static.root / "tile/entries/000"
    data = bytearray(bundle.read_bytes())
    data[40] ^= 1
    bundle.write_bytes(bytes(data))
    code, out, err = run(capsys, *audit)
    assert code != 0 and "TAMPERED" in out + err, out + err


def test_a_restarted_service_continues_the_directory(
    static: Static, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _write(static, 3)
    _wait_static(static, 3)
    static.service.stop()
    static.service.start()
    _write(static, 2)
    _wait_static(static, 5)
    assert [p.name for p in (static.root / "tile/entries").iterdir()] == ["000.p"]
    widths = {p.name for p in (static.root / "tile/entries/000.p").iterdir()}
    assert {"3", "5"} <= widths  # the partial bundles of published sizes are kept
    audit = ["ledger", "verify", static.nginx.url, "--key", static.log_pub]
    code, out, err = run(capsys, *audit, "--state", tmp_path / "audit.json")
    assert code == 0, out + err
