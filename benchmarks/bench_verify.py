"""Speed of the offline verifier, as ratios against what a user would otherwise run.

1. ``attest verify`` on a certificate whose artifact is a large file (1 GiB by default) against
   ``sha256sum`` on the same file, alternating runs in the same session with a warm page cache
   (target: verify within 1.10x of sha256sum);
2. ``attest verify --help`` cold start against ``python -c "import torch"`` (targets: under
   0.5 s, and at most a third of the torch import);
3. ``attest verify --artifact FOLDER/`` on a folder bound through its manifest (certify
   ``--artifact``): eight files of 512 MiB against ``sha256sum`` on the files in parallel
   (``xargs -P`` on every core; target: within 1.10x), and one 4 GiB file against a one-core
   ``sha256sum`` of it (target: at most 1/cores of it plus 10 %), with the peak RSS of verify
   (target: under 256 MiB). ``--scale 0.125`` makes the folder an eighth of that size.

Usage: ``python benchmarks/bench_verify.py [--size-mib 1024] [--repeats 5] [--workdir DIR]
[--scale 1.0] [--only folder]``. Prints the figures; exits 1 when a target is missed.
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

MIB = 1024 * 1024
RSS_TARGET_MIB = 256


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


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _wall_rss(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run of ``command``."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return elapsed, usage.ru_maxrss / 1024  # ru_maxrss is KiB on Linux


def _certify_folder(workdir: Path, folder: Path) -> tuple[Path, Path]:
    """A certificate binding ``folder`` through its manifest, and a trust store."""
    from attest.certificate.folder_manifest import folder_manifest

    key_path, pub_path, _ = generate_keypair(workdir / f"{folder.name}-key", passphrase=None)
    manifest = folder_manifest(folder)
    statement = build_statement(
        subjects={folder.name: manifest.root_digest},
        folders={folder.name: manifest.predicate()},
        model={"name": "bench-folder", "version": "1.0.0"},
        policy=PolicyRef(id="bench", version="0", digest=DigestSet(sha256="0" * 64)),
        verdict="pass",
    )
    cert = write_certificate(
        workdir / f"{folder.name}.cert.json",
        sign_statement(statement, [load_private_key(key_path)]),
    )
    store, _ = add_key(empty_trust_store("bench"), pub_path.read_bytes(), name="bench")
    return cert, save_trust_store(store, workdir / f"{folder.name}-trust.yaml")


def _random_file(path: Path, size: int) -> None:
    block = os.urandom(16 * MIB)  # varied bytes, written fast
    with path.open("wb") as fh:
        left = size
        while left > 0:
            fh.write(block[: min(len(block), left)])
            left -= len(block)


def bench_folder(
    workdir: Path, scale: float, repeats: int
) -> list[tuple[str, float, float, float, bool]]:
    """(case, verify s, baseline s, verify peak RSS MiB, target met) for the two folder cases."""
    sha256sum = shutil.which("sha256sum")
    if sha256sum is None:
        print("sha256sum not found: skipping the folder comparison")
        return []
    cores = _cores()
    many, single = workdir / "eight-files", workdir / "one-file"
    many.mkdir()
    single.mkdir()
    for index in range(8):
        _random_file(many / f"model-{index:05d}-of-00008.safetensors", int(512 * MIB * scale))
    _random_file(single / "model.safetensors", int(4096 * MIB * scale))
    rows = []
    for folder, baseline, limit in (
        (
            many,
            ["sh", "-c", f"find {many} -type f -print0 | xargs -0 -n 1 -P {cores} {sha256sum}"],
            lambda theirs: 1.10 * theirs,
        ),
        (
            single,
            [sha256sum, str(single / "model.safetensors")],
            lambda theirs: 1.10 * theirs / cores,
        ),
    ):
        cert, trust = _certify_folder(workdir, folder)
        verify = [*_attest_command(), "verify", str(cert), "--trust", str(trust)]
        verify += ["--artifact", f"{folder}/", "--no-state"]
        _wall(baseline)  # warm the page cache, then alternate
        ours, theirs, rss = [], [], []
        for _ in range(repeats):
            theirs.append(_wall(baseline))
            wall, peak = _wall_rss(verify)
            ours.append(wall)
            rss.append(peak)
        mine, base = statistics.median(ours), statistics.median(theirs)
        met = mine <= limit(base) and max(rss) < RSS_TARGET_MIB
        rows.append((folder.name, mine, base, max(rss), met))
    openssl = shutil.which("openssl")
    if openssl is not None:  # the same SHA-256 code as hashlib's, on one core: no target
        one_core = [openssl, "dgst", "-sha256", str(single / "model.safetensors")]
        same_code = statistics.median(_wall(one_core) for _ in range(repeats))
        print(
            f"one-file: openssl dgst -sha256 (one core, OpenSSL like hashlib) {same_code:.3f} s; "
            f"attest verify / it = {rows[-1][1] / same_code:.2f} (1/cores = {1 / cores:.2f})"
        )
    return rows


def _report_cold_start(repeats: int) -> list[str]:
    missed = []
    help_s, torch_s = bench_cold_start(repeats)
    line = f"attest verify --help: {help_s:.3f} s (target < 0.5 s)"
    if help_s >= 0.5:
        missed.append("--help cold start")
    if torch_s is not None:
        line += f"; python -c 'import torch': {torch_s:.3f} s; ratio {help_s / torch_s:.2f} (target <= 0.33)"
        if help_s > torch_s / 3:
            missed.append("--help vs import torch")
    print(line)
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="artifact size (MiB)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per command")
    parser.add_argument("--workdir", type=Path, default=None, help="where to put the artifact")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="folder case size: 1.0 is 8x512 MiB and 4 GiB"
    )
    parser.add_argument(
        "--only", choices=["file", "folder", "start"], default=None, help="run one case only"
    )
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()}")
    print(f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    missed: list[str] = []
    hashing = None
    if args.only in (None, "file"):
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            hashing = bench_hashing(Path(tmp), args.size_mib * MIB, args.repeats)
    if args.only in (None, "folder"):
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            for case, ours, theirs, rss, met in bench_folder(Path(tmp), args.scale, args.repeats):
                baseline = (
                    "sha256sum via xargs -P" if case == "eight-files" else "sha256sum, one core"
                )
                target = "<= 1.10" if case == "eight-files" else f"<= {1.10 / _cores():.2f}"
                print(
                    f"verify folder {case} (scale {args.scale}): attest verify {ours:.3f} s, "
                    f"{baseline} {theirs:.3f} s, ratio {ours / theirs:.2f} (target {target}); "
                    f"peak RSS {rss:.0f} MiB (target < {RSS_TARGET_MIB})"
                )
                if not met:
                    missed.append(f"folder {case}")
    if hashing is not None:
        ours, theirs = hashing
        ratio = ours / theirs
        print(
            f"verify {args.size_mib} MiB artifact: attest verify {ours:.3f} s, "
            f"sha256sum {theirs:.3f} s, ratio {ratio:.2f} (target <= 1.10)"
        )
        if ratio > 1.10:
            missed.append("verify vs sha256sum")
    if args.only in (None, "start"):
        missed += _report_cold_start(args.repeats)
    print("targets: " + ("all met" if not missed else "MISSED: " + ", ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
