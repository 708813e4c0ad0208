"""Speed of the offline verifier, as ratios against what a user would otherwise run.

1. ``attest verify`` on a certificate whose artifact is a large file (1 GiB by default) against
   ``sha256sum`` on the same file, alternating runs in the same session with a warm page cache
   (target: verify within 1.10x of sha256sum);
2. ``attest verify --help`` cold start against ``python -c "import torch"`` (targets: under
   0.5 s, and at most a third of the torch import).

Usage: ``python benchmarks/bench_verify.py [--size-mib 1024] [--repeats 5] [--workdir DIR]``.
Prints the figures; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attest.certificate.signing import generate_keypair, load_private_key
from attest.certificate.statement import (
    DigestSet,
    PolicyRef,
    build_statement,
    sign_statement,
    subjects_from_paths,
    write_certificate,
)
from attest.verification.trust import add_key, empty_trust_store, save_trust_store


def _attest_command() -> list[str]:
    script = Path(sys.executable).with_name("attest")
    return [str(script)] if script.exists() else [sys.executable, "-m", "attest"]


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.decode()[-500:]}")
    return elapsed


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _write_random(path: Path, size: int) -> None:
    """A well-formed ONNX protobuf of about ``size`` bytes: random bytes in one unknown
    length-delimited field (field 100), which the verifier's external-data scan reads past."""
    chunk = 16 * 1024 * 1024
    with path.open("wb") as fh:
        fh.write(b"\x08\x07" + _varint((100 << 3) | 2) + _varint(size))
        left = size
        while left > 0:
            fh.write(os.urandom(min(chunk, left)))
            left -= chunk


def _setup(workdir: Path, size: int) -> tuple[Path, Path, Path]:
    artifact = workdir / "model.onnx"
    _write_random(artifact, size)
    key_path, pub_path, _ = generate_keypair(workdir / "bench", passphrase=None)
    statement = build_statement(
        subjects=subjects_from_paths({"model.onnx": artifact}),
        model={"name": "bench-model", "version": "1.0.0"},
        policy=PolicyRef(id="bench", version="0", digest=DigestSet(sha256="0" * 64)),
        verdict="pass",
    )
    cert = write_certificate(
        workdir / "cert.json", sign_statement(statement, [load_private_key(key_path)])
    )
    store, _ = add_key(empty_trust_store("bench"), pub_path.read_bytes(), name="bench")
    trust = save_trust_store(store, workdir / "trust.yaml")
    return artifact, cert, trust


def bench_hashing(workdir: Path, size: int, repeats: int) -> tuple[float, float] | None:
    sha256sum = shutil.which("sha256sum")
    if sha256sum is None:
        print("sha256sum not found: skipping the hashing comparison")
        return None
    artifact, cert, trust = _setup(workdir, size)
    verify = [*_attest_command(), "verify", str(cert), "--trust", str(trust)]
    verify += ["--artifact", str(artifact)]
    baseline = [sha256sum, str(artifact)]
    _wall(baseline)  # warm the page cache, then alternate
    ours, theirs = [], []
    for _ in range(repeats):
        theirs.append(_wall(baseline))
        ours.append(_wall(verify))
    return statistics.median(ours), statistics.median(theirs)


def bench_cold_start(repeats: int) -> tuple[float, float | None]:
    help_command = [*_attest_command(), "verify", "--help"]
    _wall(help_command)
    ours = statistics.median(_wall(help_command) for _ in range(repeats))
    torch_command = [sys.executable, "-c", "import torch"]
    try:
        _wall(torch_command)
    except SystemExit:
        return ours, None
    return ours, statistics.median(_wall(torch_command) for _ in range(repeats))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="artifact size (MiB)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per command")
    parser.add_argument("--workdir", type=Path, default=None, help="where to put the artifact")
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()}")
    print(f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    missed: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        size = args.size_mib * 1024 * 1024
        hashing = bench_hashing(Path(tmp), size, args.repeats)
    if hashing is not None:
        ours, theirs = hashing
        ratio = ours / theirs
        print(
            f"verify {args.size_mib} MiB artifact: attest verify {ours:.3f} s, "
            f"sha256sum {theirs:.3f} s, ratio {ratio:.2f} (target <= 1.10)"
        )
        if ratio > 1.10:
            missed.append("verify vs sha256sum")
    help_s, torch_s = bench_cold_start(args.repeats)
    line = f"attest verify --help: {help_s:.3f} s (target < 0.5 s)"
    if help_s >= 0.5:
        missed.append("--help cold start")
    if torch_s is not None:
        line += f"; python -c 'import torch': {torch_s:.3f} s; ratio {help_s / torch_s:.2f} (target <= 0.33)"
        if help_s > torch_s / 3:
            missed.append("--help vs import torch")
    print(line)
    print("targets: " + ("all met" if not missed else "MISSED: " + ", ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
