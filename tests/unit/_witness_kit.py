"""Keys, logs.yaml and in-memory trees for the witness tests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from attest.certificate.signing import PrivateKey, generate_keypair, load_private_key
from attest.ledger.checkpoint import Checkpoint, sign_checkpoint
from attest.ledger.merkle import consistency_proof, perfect_subtrees, root_from_leaf_hashes
from attest.ledger.witness.core import Witness
from attest.ledger.witness.logs import load_logs

ORIGIN = "test.example/ledger"


def make_key(folder: Path, name: str) -> tuple[PrivateKey, Path]:
    key_path, pub_path, _ = generate_keypair(folder / name, passphrase=None)
    return load_private_key(key_path, prompt=False), pub_path


def write_logs(path: Path, pub: Path, origin: str = ORIGIN) -> Path:
    path.write_text(f"logs:\n  - origin: {origin}\n    key: {pub}\n")
    return path


class Tree:
    """An in-memory tree of leaf hashes whose checkpoints a log key signs."""

    def __init__(self, key: PrivateKey, salt: bytes = b"", origin: str = ORIGIN) -> None:
        self.key, self.salt, self.origin = key, salt, origin
        self.leaves: list[bytes] = []

    def grow(self, count: int) -> Tree:
        for _ in range(count):
            self.leaves.append(hashlib.sha256(self.salt + b"%d" % len(self.leaves)).digest())
        return self

    def note(self, size: int | None = None) -> str:
        size = len(self.leaves) if size is None else size
        root = root_from_leaf_hashes(self.leaves[:size])
        return sign_checkpoint(Checkpoint(self.origin, size, root), self.key)

    def proof(self, old: int, new: int | None = None) -> list[bytes]:
        new = len(self.leaves) if new is None else new
        if old in (0, new):
            return []
        return consistency_proof(self._nodes, old, new)

    def _nodes(self, keys: Sequence[tuple[int, int]]) -> list[bytes]:
        out = []
        for level, index in keys:
            start = index << level
            out.append(root_from_leaf_hashes(self.leaves[start : start + (1 << level)]))
        return out


def make_witness(tmp: Path, log_pub: Path, name: str = "w.example/w1") -> Witness:
    key, _ = make_key(tmp, name.replace("/", "_"))
    return Witness(key, name, load_logs(write_logs(tmp / "logs.yaml", log_pub)), tmp / "state")


__all__ = ["ORIGIN", "Tree", "make_key", "make_witness", "perfect_subtrees", "write_logs"]


class WitnessProcess:
    """``attest ledger witness serve`` as a child process on a free loopback port."""

    def __init__(self, tmp: Path, key: Path, name: str, logs: Path, log: Path) -> None:
        import os
        import subprocess
        import sys
        import time

        import httpx
        from _ledger_service_kit import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = log
        args = [sys.executable, "-m", "attest", "ledger", "witness", "serve", "--key", str(key)]
        args += ["--name", name, "--logs", str(logs), "--state", str(tmp / "state")]
        args += ["--listen", f"127.0.0.1:{self.port}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        with log.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"witness exited: {log.read_text()[-2000:]}")
            try:
                httpx.get(self.url + "healthz", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"witness did not come up: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
