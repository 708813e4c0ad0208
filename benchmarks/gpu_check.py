"""GPU check of the collect side's CUDA paths (run by the lead on a CUDA host; CPU tests never need it).

Builds a small CNN spec with ``device: cuda``, runs ``attest.collection.collect`` (topology and
profiler runners) and prints what the CUDA paths produced: the deterministic flags and
``CUBLAS_WORKSPACE_CONFIG`` in the envelope, the ``cuda:sm_XX`` affinity tag, CUDA-event
timings, allocator deltas per operator, peak memory and fragmentation, determinism over the
repeats, float64 fidelity on the GPU, then merges the CUDA evidence with a CPU collection of
the same weights. Exits 1 if any expectation fails.

Usage: .venv/bin/python benchmarks/gpu_check.py [--out DIR] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("CUDA is not available here; run this on a GPU host")
        return 2
    from bench_collect import write_spec

    from attest.collection import collect
    from attest.evidence.merge import merge_evidence

    out_dir = args.out or Path(tempfile.mkdtemp(prefix="attest-gpu-"))
    spec = write_spec(out_dir / "spec", blocks=8, batch=16, size=32, repeats=args.repeats)
    text = spec.read_text()
    spec.write_text(text + "device: cuda\n")
    runners = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]
    started = time.perf_counter()
    gpu = collect(spec, runners=runners, out=out_dir / "evidence-cuda.json")
    gpu_s = time.perf_counter() - started
    spec.write_text(text)
    cpu = collect(spec, runners=runners, out=out_dir / "evidence-cpu.json")
    merged = merge_evidence([cpu, gpu], ["cpu", "cuda"])
    (out_dir / "evidence-merged.json").write_text(
        json.dumps(merged.model_dump(mode="json"), indent=1)
    )

    env = gpu.environment
    failures: list[str] = []

    def expect(ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    expect(env["target"].startswith("cuda:sm_"), f"affinity tag {env['target']}")
    expect(
        env["deterministic_algorithms"] is True, "use_deterministic_algorithms on during collect"
    )
    expect(
        env["cudnn_deterministic"] is True and env["cudnn_benchmark"] is False,
        "cuDNN deterministic, no benchmark",
    )
    expect(
        env["env"]["CUBLAS_WORKSPACE_CONFIG"] is not None,
        f"CUBLAS_WORKSPACE_CONFIG={env['env']['CUBLAS_WORKSPACE_CONFIG']}",
    )
    expect(gpu.model_failure is None, "model ran on CUDA")
    rows = gpu.operators
    expect(
        all(r.forward_ns is not None for r in rows), "CUDA-event forward timings on every operator"
    )
    expect(any(r.allocator_delta_bytes for r in rows), "allocator deltas recorded")
    mm = gpu.model_metrics
    expect((mm.get("peak_memory_bytes") or 0) > 0, f"peak memory {mm.get('peak_memory_bytes')}")
    expect(
        mm.get("fragmentation_index") is not None,
        f"fragmentation index {mm.get('fragmentation_index')}",
    )
    det = gpu.checks["determinism"].summary
    expect(
        det["bit_exact_reproducibility"] == 1.0,
        f"bit-exact reproducibility {det['bit_exact_reproducibility']}",
    )
    fid = gpu.checks["fidelity"].summary
    expect((fid["min_fidelity_pct"] or 0) > 99.9, f"min fidelity {fid['min_fidelity_pct']}")
    expect(len(merged.targets) == 2, f"merged targets {merged.targets}")
    print(
        json.dumps(
            {
                "collect_seconds": round(gpu_s, 2),
                "operators": len(rows),
                "bit_exact_reproducibility": det["bit_exact_reproducibility"],
                "min_stability_score": det["min_stability_score"],
                "min_fidelity_pct": fid["min_fidelity_pct"],
                "min_local_fidelity_pct": fid["min_local_fidelity_pct"],
                "peak_memory_bytes": mm.get("peak_memory_bytes"),
                "memory_delta_ratio": mm.get("memory_delta_ratio"),
                "fragmentation_index": mm.get("fragmentation_index"),
                "thread_sensitive": mm.get("thread_sensitive"),
                "evidence": str(out_dir),
            },
            indent=1,
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
