"""Peak RSS of each step of ``attest collect`` up to the float64 fidelity pass, against the bare
process (issue #38: "peak RSS at most 3x the bare process on every model").

``bench_certify.py`` reports one peak per collect phase, and the profile phase holds the float64
pass, 100 repeats and the thread-count run: too coarse to say which step holds the memory, and
too slow to iterate on. This script runs the steps that come before the repeats in one process,
as ``attest collect`` runs them (the same runtime envelope, context and phases), and resets the
kernel's peak-RSS counter (``VmHWM``, by writing 5 to ``/proc/self/clear_refs``) before each:

- ``preflight float32`` / ``preflight float64``: the two passes of :mod:`attest.collection.preflight`;
- ``capture``: run 0 (:func:`attest.collection.runners.measure_capture`);
- ``float64 fidelity``: :func:`attest.collection.profile.float64_pass.measure_fidelity`;
- ``repeat``: one determinism repeat, for comparison;
- ``flow`` / ``second_order``: the ``gradient_flow`` check (which hands ``second_order`` its
  double-backward graph when the products run on the whole probe) and the ``second_order``
  check, as the gradients phase runs them (``--steps flow,second_order``: no capture needed).

``--collect`` runs the collect itself instead (``attest.collection.collect`` on the spec, the
runners of ``--phases``, ``repeats: --repeats``): a thread samples the resident set every 50 ms and
the collect's progress messages mark where each step starts (each phase, each gradcheck group,
each gradient check, the profile's float64 pass, repeats and thread-count run), so the table
gives each step's resident set at its start and its highest sample before the next step: what a
check starts on (what the steps before it left held) against what it adds. The phases' own
peaks (``VmHWM``, from the evidence) are printed below it.

``--steps`` names them in the order collect runs them (the default, this version's: run 0, then
the preflight's float64 pass, then the float64 fidelity pass; before it the preflight ran
``preflight32,preflight64`` first).

The bare figure is bench_certify.py's bare child (imports, model, weights, probe, float32
forward+backward with the loss, ``--passes`` + 1 times), run before and after; the lower peak
counts, as there. Each step's peak is printed with its ratio to the bare peak.

    .venv/bin/python benchmarks/bench_memory_phases.py --model swinunetr [--size 64]
        [--img-size 64] [--feature-size 12] [--steps ...] [--json out.json] [--log steps.log]
    .venv/bin/python benchmarks/bench_memory_phases.py --model swinunetr --feature-size 12
        --collect [--phases topology,profile,gradients] [--repeats 3]

``--size N``: the probe's spatial side (the architecture's default otherwise); ``--img-size``
(UNETR only) builds UNETR for that side (its position embedding is sized by it);
``--feature-size`` (SwinUNETR only) its width, for a cheaper run of the same architecture.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_certify  # benchmarks/bench_certify.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
GIB = float(1 << 30)


def _sized_spec(
    folder: Path,
    kind: str,
    size: int | None,
    img_size: int | None,
    feature_size: int | None,
    repeats: int = 2,
) -> Path:
    """bench_certify's spec, with the probe's side ``size`` (and UNETR built for ``img_size``,
    SwinUNETR with ``feature_size``)."""
    import real_models

    shape = real_models.PROBE_SHAPES[kind]
    if size is not None:
        real_models.PROBE_SHAPES[kind] = (*shape[:2], *(size,) * (len(shape) - 2))
    built = None
    if feature_size is not None and kind == "swinunetr":
        built = f"SwinUNETR(in_channels=1, out_channels=2, feature_size={feature_size})"
    if img_size is not None and kind == "unetr":
        built = f"UNETR(in_channels=1, out_channels=2, img_size={img_size}, feature_size=16)"
    if built is not None:  # the spec's model.py builds this one instead
        line = "    return real_models.build(kind, quick)"
        bench_certify.MODEL_PY = bench_certify.MODEL_PY.replace(
            line, f"    from monai.networks import nets\n\n    return nets.{built}"
        )
    return bench_certify.write_spec(folder, kind, repeats=repeats)


class _Sampler:
    """Reads ``/proc/self/status`` every 20 ms on a thread and keeps the sample of the highest
    RSS: its split into anonymous memory (tensors, the allocator's heap) and file pages (the
    mapped libraries and run 0's spill file), which ``VmHWM`` alone does not say."""

    FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")

    def __init__(self) -> None:
        import threading

        self.top: dict[str, int] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import re

        while not self.done.wait(0.02):
            text = Path("/proc/self/status").read_text()
            sample = {
                f: int(m.group(1)) << 10
                for f in self.FIELDS
                if (m := re.search(rf"^{f}:\s+(\d+)", text, re.MULTILINE))
            }
            if sample.get("VmRSS", 0) > self.top.get("VmRSS", -1):
                self.top = sample

    def __enter__(self) -> _Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def measure_steps(spec_path: Path, order: list[str]) -> list[dict[str, Any]]:
    """Each step's wall time and peak RSS, in this process."""
    from attest.collection import runtime_info
    from attest.collection.context import CheckSettings, CollectContext, frozen_heap
    from attest.collection.gradients import flow as gradient_flow
    from attest.collection.gradients import second_order
    from attest.collection.gradients.runner import run_check
    from attest.collection.preflight import _run_once, preflight
    from attest.collection.profile.float64_pass import measure_fidelity
    from attest.collection.profile.split import run_piece
    from attest.collection.resources import _peak_rss, _reset_peak, current_rss
    from attest.collection.runners import measure_capture
    from attest.spec import load_spec

    steps: list[dict[str, Any]] = []

    def preflight_pass(ctx: CollectContext, precision: str) -> None:
        if "precisions" in inspect.signature(preflight).parameters:  # as collect runs it
            preflight(ctx, [precision])
        else:  # a version whose preflight runs both precisions: the one pass
            _run_once(ctx, precision)

    def fidelity(ctx: CollectContext) -> None:
        profile = ctx.profiler.profile
        assert profile is not None
        measure_fidelity(ctx, profile)

    def gradient_check(ctx: CollectContext, check_id: str, fn: Any) -> None:
        ctx.gradients.keep_graph = True  # the hand-offs on, as the gradients phase runs them
        if check_id == "second_order":  # what the runner drops before it (runner._in_order)
            ctx.gradients.release_after("custom_ops")
            if ctx.gradients.graph is None:  # accumulation runs first, then drops its share
                ctx.gradients.release_after("accumulation")
        result = run_check(check_id, fn, ctx)
        ctx.gradients.release_after(check_id)
        statuses = [i.status for i in result.items]
        print(
            f"  {check_id}: {result.status}, {len(statuses)} items, "
            f"{statuses.count('fail')} failed; parameters "
            + json.dumps({k: result.parameters.get(k) for k in ("batch", "crop", "batch_note")}),
            file=sys.stderr,
            flush=True,
        )

    def step(name: str, work: Any) -> None:
        import gc

        gc.collect()
        _reset_peak()
        before = current_rss() or 0
        started = time.perf_counter()
        with _Sampler() as sampler:
            work()
        steps.append(
            {
                "step": name,
                "wall_s": time.perf_counter() - started,
                "rss_before_bytes": before,
                "peak_rss_bytes": _peak_rss() or 0,
                "at_sampled_peak": sampler.top,
            }
        )
        split = ", ".join(f"{k} {v / GIB:.2f}" for k, v in sampler.top.items())
        print(
            f"  {name}: {steps[-1]['wall_s']:.1f} s, peak {steps[-1]['peak_rss_bytes'] / GIB:.2f}"
            f" GiB (RSS before {before / GIB:.2f}; at the sampled peak: {split})",
            file=sys.stderr,
            flush=True,
        )

    loaded = load_spec(spec_path)
    settings = CheckSettings()
    with runtime_info.runtime(loaded, settings), frozen_heap():
        ctx = CollectContext(spec=loaded, settings=settings, output_dir=None, progress=None)
        work = {
            "preflight32": ("preflight float32", lambda: _run_once(ctx, loaded.precision)),
            "preflight64": ("preflight float64", lambda: preflight_pass(ctx, "float64")),
            "capture": ("capture", lambda: measure_capture(ctx)),
            "fidelity": ("float64 fidelity", lambda: fidelity(ctx)),
            "repeat": ("repeat", lambda: run_piece(ctx, "repeat/001")),
            "flow": (
                "gradient_flow",
                lambda: gradient_check(ctx, "gradient_flow", gradient_flow.run),
            ),
            "second_order": (
                "second_order",
                lambda: gradient_check(ctx, "second_order", second_order.run),
            ),
        }
        for name in order:
            step(*work[name])
    return steps


def _rss_now() -> dict[str, int]:
    import re

    text = Path("/proc/self/status").read_text()
    return {
        f: int(m.group(1)) << 10
        for f in _Sampler.FIELDS
        if (m := re.search(rf"^{f}:\s+(\d+)", text, re.MULTILINE))
    }


def measure_collect(spec_path: Path, phases: list[str]) -> dict[str, Any]:
    """The collect of ``phases`` (runner phase names) on the spec, in this process: each step's
    start (a progress message), its resident set then and its highest 50 ms sample before the
    next step; and the evidence's phase records."""
    import threading

    from attest.collection import CHECK_RUNNERS, collect, phase_name

    samples: list[tuple[float, dict[str, int]]] = []
    marks: list[tuple[float, str, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            samples.append((time.perf_counter(), _rss_now()))

    def progress(message: str) -> None:
        if message.startswith("plan:"):
            return
        marks.append((time.perf_counter(), message, _rss_now().get("VmRSS", 0)))
        print(f"  {message} (RSS {marks[-1][2] / GIB:.2f} GiB)", file=sys.stderr, flush=True)

    runners = [r for r in CHECK_RUNNERS if phase_name(r) in phases]
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    started = time.perf_counter()
    try:
        evidence = collect(spec_path, progress=progress, runners=runners)
    finally:
        done.set()
        thread.join()
    marks.append((time.perf_counter(), "end", _rss_now().get("VmRSS", 0)))
    steps = []
    for (t0, message, at_start), (t1, _, _) in itertools.pairwise(marks):
        inside = [v for t, v in samples if t0 <= t < t1]
        top = max(inside, key=lambda v: v.get("VmRSS", 0), default={"VmRSS": at_start})
        steps.append(
            {
                "step": message,
                "start_s": t0 - started,
                "wall_s": t1 - t0,
                "rss_start_bytes": at_start,
                "peak_rss_bytes": max(top.get("VmRSS", 0), at_start),
                "at_sampled_peak": top,
            }
        )
    records = [
        {"phase": p.phase, "peak_rss_bytes": p.peak_rss_bytes, "rss_start_bytes": p.rss_start_bytes}
        for p in evidence.phases
    ]
    checks = {c: r.peak_rss_bytes for c, r in evidence.checks.items() if r.peak_rss_bytes}
    return {"steps": steps, "phases": records, "checks": checks}


def _print_collect(found: dict[str, Any], bare: int) -> None:
    print(
        "| step (progress message) | start s | wall s | RSS at start GiB | peak GiB | x bare |"
        " anon / file GiB at the peak |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    for s in found["steps"]:
        top = s["at_sampled_peak"]
        split = (
            f"{top['RssAnon'] / GIB:.2f} / {top['RssFile'] / GIB:.2f}"
            if "RssAnon" in top and "RssFile" in top
            else "(no sample)"
        )
        print(
            f"| {s['step'][:70]} | {s['start_s']:.0f} | {s['wall_s']:.1f} "
            f"| {s['rss_start_bytes'] / GIB:.2f} | {s['peak_rss_bytes'] / GIB:.2f} "
            f"| {s['peak_rss_bytes'] / bare:.2f} | {split} |"
        )
    print("\nphases (VmHWM, from the evidence):")
    for p in found["phases"]:
        peak = p["peak_rss_bytes"] or 0
        print(f"  {p['phase']}: peak {peak / GIB:.2f} GiB ({peak / bare:.2f}x bare)")
    print("checks (peak_rss_bytes, from the evidence: the gradient checks' own, else the phase's):")
    for check_id, peak in found.get("checks", {}).items():
        print(f"  {check_id}: {peak / GIB:.2f} GiB ({peak / bare:.2f}x bare)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="swinunetr")
    parser.add_argument("--size", type=int, default=None, help="the probe's spatial side")
    parser.add_argument("--img-size", type=int, default=None, help="UNETR's img_size")
    parser.add_argument("--feature-size", type=int, default=None, help="SwinUNETR's")
    parser.add_argument("--passes", type=int, default=2, help="timed passes per bare child")
    parser.add_argument(
        "--steps",
        default="capture,preflight64,fidelity",
        help="in collect's order (before this branch: preflight32,preflight64,capture,fidelity;"
        " add repeat for one determinism repeat; flow,second_order for the gradient checks)",
    )
    parser.add_argument(
        "--collect",
        action="store_true",
        help="run the collect itself and print each step's RSS at its start and its peak",
    )
    parser.add_argument(
        "--phases",
        default="topology,profile,gradients",
        help="with --collect: the runner phases to run (topology,profile,gradients,ig,...)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="with --collect: the spec's")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--log", type=Path, default=None, help="the steps' lines, as they go")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:  # the steps, in a process of their own
        if args.collect:
            found = measure_collect(args.child / "attest.yaml", args.phases.split(","))
            (args.child / "steps.json").write_text(json.dumps(found))
            return
        steps = measure_steps(args.child / "attest.yaml", args.steps.split(","))
        (args.child / "steps.json").write_text(json.dumps(steps))
        return
    with tempfile.TemporaryDirectory(prefix="attest-bench-mem-") as tmp:
        folder = Path(tmp)
        repeats = args.repeats if args.collect else 2
        _sized_spec(folder, args.model, args.size, args.img_size, args.feature_size, repeats)
        bare_argv = [
            sys.executable, "-c", bench_certify.BARE, str(folder), args.model, "full",
            str(args.passes), str(bench_certify.THREADS),
        ]  # fmt: skip
        bare = [bench_certify._wait_child(bare_argv)]
        print(f"bare: peak {bare[0]['peak_rss_bytes'] / GIB:.2f} GiB", flush=True)
        child = [sys.executable, __file__, "--child", str(folder), "--steps", args.steps]
        if args.collect:
            child += ["--collect", "--phases", args.phases]
        run = bench_certify._wait_child(child, log=args.log)
        steps = json.loads((folder / "steps.json").read_text())
        bare.append(bench_certify._wait_child(bare_argv))
    peak = min(b["peak_rss_bytes"] for b in bare)
    children = ", ".join(f"{b['peak_rss_bytes'] / GIB:.2f}" for b in bare)
    print(
        f"\n{args.model} probe side {args.size or 'default'}: bare peak {peak / GIB:.2f} GiB "
        f"(children {children}); "
        f"whole child {run['wall_s']:.0f} s\n"
    )
    if args.collect:
        _print_collect(steps, peak)
        if args.json:
            args.json.write_text(json.dumps({"bare": bare, **steps}, indent=1))
        return
    print(
        "| step | wall s | peak RSS GiB | x bare | anon / file GiB at the sampled peak |\n"
        "| --- | ---: | ---: | ---: | ---: |"
    )
    for s in steps:
        ratio = s["peak_rss_bytes"] / peak
        top = s["at_sampled_peak"]
        split = f"{top.get('RssAnon', 0) / GIB:.2f} / {top.get('RssFile', 0) / GIB:.2f}"
        print(
            f"| {s['step']} | {s['wall_s']:.1f} | {s['peak_rss_bytes'] / GIB:.2f} | {ratio:.2f} "
            f"| {split} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"bare": bare, "steps": steps}, indent=1))


if __name__ == "__main__":
    main()
