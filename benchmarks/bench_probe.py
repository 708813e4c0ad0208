"""Speed of ``attest verify --probe`` against a bare onnxruntime run of the same model.

For each example (``examples/digits``, ``examples/phantom-seg``) this script exports the model
and writes its probe bundle with the ``export`` check, signs a certificate binding both (a
throwaway key), then times, alternating, in fresh processes:

- ``attest verify CERT --trust T --artifact model.onnx --probe probe.npz`` (the whole
  verifier: strict JSON, signature, schema, subject digests, then the probe: onnxruntime
  session with the certified settings, one run, bit-exact comparison);
- the alternative: ``python -c`` importing numpy and onnxruntime, creating a session on the
  same file and running it once on the same inputs.

Both include interpreter start-up, which is what an operator on the server pays. Target:
ratio <= 1.5 in wall time; the CPU time of each child process (user + system) is reported too,
since on a shared machine it is steadier than wall time. ``attest`` is byte-compiled first, as
``pip install`` does, so that no run pays for compiling a module edited since the last one
(this checkout's environment sets PYTHONDONTWRITEBYTECODE). ``--append FILE`` appends a
Markdown section with the figures.

    .venv/bin/python benchmarks/bench_probe.py [--repeats 7] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("digits", "phantom-seg")
TARGET = 1.5

BARE = """
import sys, numpy as np, onnxruntime as ort
x = np.load(sys.argv[2])["input_0"]
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
session.run(None, {session.get_inputs()[0].name: x})
"""


def _prepare(example: str, work: Path) -> dict[str, Path]:
    """Export, probe and certify one example (not timed)."""
    import torch

    from attest.certificate.signing import generate_keypair, load_private_key
    from attest.certificate.statement import build_statement, sign_statement, write_certificate
    from attest.collection.context import CollectContext
    from attest.collection.export import check as export_check
    from attest.core.io import sha256_file
    from attest.spec import load_spec
    from attest.verification.trust import add_key, empty_trust_store, save_trust_store

    torch.set_num_threads(2)
    out = work / example
    spec = load_spec(ROOT / "examples" / example / "attest.yaml")
    ctx = CollectContext(spec=spec, output_dir=out)
    (result,) = export_check.run(ctx)
    record = ctx.export
    if result.status != "computed" or record is None:
        raise SystemExit(f"{example}: export failed: {result.reason or result.items[0].message}")
    info = {
        "path": record.onnx.path,
        "probe_path": record.probe_bundle.path,
        "deployment": record.deployment.model_dump(mode="json"),
        "onnx_mapping": record.onnx_mapping.model_dump(mode="json"),
    }
    key_path, pub_path, _ = generate_keypair(work / f"{example}-key", passphrase=None)
    statement = build_statement(
        subjects={
            "model.onnx": sha256_file(info["path"]),
            Path(info["probe_path"]).name: sha256_file(info["probe_path"]),
        },
        model={"name": spec.name, "version": spec.version},
        policy={"id": "bench", "version": "1", "digest": {"sha256": "0" * 64}},
        verdict="pass",
        deployment=info["deployment"],
        onnx_mapping=info["onnx_mapping"],
    )
    cert = work / f"{example}-cert.json"
    write_certificate(cert, sign_statement(statement, [load_private_key(key_path)]))
    store, _ = add_key(empty_trust_store("trust"), pub_path.read_bytes(), name="bench")
    trust = save_trust_store(store, work / f"{example}-trust.yaml")
    return {
        "cert": cert,
        "trust": trust,
        "onnx": Path(info["path"]),
        "probe": Path(info["probe_path"]),
    }


def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(
            f"command failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout}{result.stderr}"
        )
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return elapsed, cpu


def _in_process(files: dict[str, Path], repeats: int) -> tuple[float, float]:
    """Median seconds of verify() and of a bare session + run, both with imports warm."""
    import numpy as np
    import onnxruntime as ort

    from attest.verification.verifier import verify

    x = np.load(files["probe"])["input_0"]
    verify_times, bare_times = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        report = verify(
            files["cert"], trust=files["trust"], artifacts=[files["onnx"]], probe=files["probe"]
        )
        verify_times.append(time.perf_counter() - started)
        assert report.verified, report.reasons
        started = time.perf_counter()
        session = ort.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"])
        session.run(None, {session.get_inputs()[0].name: x})
        bare_times.append(time.perf_counter() - started)
    return statistics.median(verify_times), statistics.median(bare_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--append", type=Path, default=None, help="append a Markdown section")
    args = parser.parse_args()
    attest = [sys.executable, "-m", "attest"]
    compileall.compile_dir(ROOT / "attest", quiet=1)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        work = Path(tmp)
        for example in EXAMPLES:
            files = _prepare(example, work)
            verify_cmd = [
                *attest, "verify", str(files["cert"]), "--trust", str(files["trust"]),
                "--artifact", str(files["onnx"]), "--probe", str(files["probe"]),
            ]  # fmt: skip
            plain_cmd = verify_cmd[:-2]  # the same verification without the probe
            bare_cmd = [sys.executable, "-c", BARE, str(files["onnx"]), str(files["probe"])]
            _timed(verify_cmd), _timed(bare_cmd), _timed(plain_cmd)  # warm the page cache
            verify_runs, bare_runs, plain_runs = [], [], []
            for _ in range(args.repeats):  # alternate, so load changes hit all three
                verify_runs.append(_timed(verify_cmd))
                bare_runs.append(_timed(bare_cmd))
                plain_runs.append(_timed(plain_cmd))
            cli_v, cpu_v = (statistics.median(x) for x in zip(*verify_runs, strict=True))
            cli_b, cpu_b = (statistics.median(x) for x in zip(*bare_runs, strict=True))
            cli_plain = statistics.median(w for w, _ in plain_runs)
            proc_v, proc_b = _in_process(files, args.repeats)
            size_kib = files["onnx"].stat().st_size / 1024
            rows.append((example, size_kib, cli_v, cli_b, cli_plain, proc_v, proc_b, cpu_v / cpu_b))
            print(
                f"{example}: model.onnx {size_kib:.0f} KiB | attest verify --probe {cli_v:.3f} s vs "
                f"bare onnxruntime {cli_b:.3f} s -> ratio {cli_v / cli_b:.2f} (target <= {TARGET}); "
                f"CPU {cpu_v:.3f} s vs {cpu_b:.3f} s -> {cpu_v / cpu_b:.2f} | "
                f"verify without --probe {cli_plain:.3f} s | "
                f"in-process verify() {proc_v * 1e3:.1f} ms vs session+run {proc_b * 1e3:.1f} ms"
            )
    worst = max(r[2] / r[3] for r in rows)
    print(
        f"worst ratio {worst:.2f}: {'OK' if worst <= TARGET else 'ABOVE TARGET'} "
        f"(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )
    if args.append is not None:
        cpu = platform.processor() or platform.machine()
        lines = [
            "",
            "## Behavioural probe (`benchmarks/bench_probe.py`)",
            "",
            f"Machine: {platform.system()} {platform.machine()} ({cpu}), {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; {date.today()}.",
            f"Command: `.venv/bin/python benchmarks/bench_probe.py --repeats {args.repeats}` "
            "(medians of alternating runs in fresh processes).",
            "",
            "| example | model.onnx | `attest verify --probe` | bare onnxruntime session + run | ratio | target | CPU-time ratio | `attest verify` without `--probe` | in-process `verify(probe=...)` | in-process session + run |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for example, size_kib, cli_v, cli_b, cli_plain, proc_v, proc_b, cpu_ratio in rows:
            lines.append(
                f"| {example} | {size_kib:.0f} KiB | {cli_v:.3f} s | {cli_b:.3f} s | "
                f"{cli_v / cli_b:.2f} | <= {TARGET} | {cpu_ratio:.2f} | {cli_plain:.3f} s | "
                f"{proc_v * 1e3:.1f} ms | {proc_b * 1e3:.1f} ms |"
            )
        with args.append.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
