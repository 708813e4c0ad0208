"""``attest collect``: profile a model and run every check, or merge evidence of several targets.

    attest collect attest.yaml -o evidence.json [--json]
    attest collect --merge cpu.json cuda.json -o all.json [--json]
    attest collect attest.yaml --ray auto --targets targets.yaml -o evidence.json
    attest collect attest.yaml -o evidence.json --resume .attest-work/evidence.json

Exit codes: 0 when evidence was written and its checks ran (whatever they show), 2 on bad
input, on a model that cannot run one forward and backward of its probe (the preflight, before
any check), and when the model raised in the reference run or every check that ran errored
(the evidence is written for the record, but it judges nothing). Progress goes to stderr
(attest.core.progress_display): a live display on a terminal, plain lines with a heartbeat
otherwise or with --progress plain, nothing with --progress none, --quiet or (in auto) --json.
torch is imported only when the command runs.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from attest.cli.budget_report import say_overrun
from attest.cli.collect_signing import (
    collector_options,
    load_collector,
    sign_collected,
    signed_summary,
    target_signed_lines,
)
from attest.cli.output import echo_json
from attest.cli.progress_option import heartbeat_seconds, progress_option
from attest.errors import CollectError, InputError

if TYPE_CHECKING:  # pragma: no cover
    from attest.evidence.model import Evidence


def _summary_lines(evidence: Evidence, out: Path) -> list[str]:
    model = evidence.model
    lines = [
        f"evidence for {model.get('name')} {model.get('version')} "
        f"({', '.join(evidence.targets) or 'unknown target'}) written to {out}"
    ]
    if evidence.model_failure is not None:
        f = evidence.model_failure
        where = f"module {f.module or '<root>'!r}" + (
            f", operator {f.operator_id} {f.op}" if f.op else ""
        )
        lines.append(f"  model raised {f.error_type} in {f.phase} at {where}: {f.message}")
    if evidence.compile is not None:
        lines.append(f"  {evidence.compile.note}")
    reused = [p.phase for p in evidence.phases if p.reused]
    if reused:
        lines.append(f"  resumed: phases {', '.join(reused)} reused from the killed collect")
    metrics = evidence.model_metrics
    lines.append(
        f"  {metrics.get('operators')} operators; bit-exact reproducibility "
        f"{metrics.get('bit_exact_reproducibility')}; min stability {metrics.get('min_stability_score')}; "
        f"min fidelity {metrics.get('min_fidelity_pct')}"
    )
    for check_id, result in evidence.checks.items():
        fails = sum(1 for i in result.items if i.status == "fail")
        warns = sum(1 for i in result.items if i.status == "warn")
        skipped = sum(1 for i in result.items if i.status == "not_computed")
        status: str = result.status
        note = ""
        if result.status == "computed":
            note = f" ({fails} fail, {warns} warn" + (
                f", {skipped} not computed)" if skipped else ")"
            )
        # items not computed are counted, and why given (e.g. after a failed topology)
        shown = result.status != "computed" or skipped
        reason = f": {result.reason}" if result.reason and shown else ""
        if result.status == "computed" and result.items and skipped == len(result.items):
            # every item not computed (e.g. the per-operator checks after a failed topology):
            # never printed as "computed"
            status, note = "not computed", f" (all {skipped} items)"
            reason = f": {result.reason}" if result.reason else ""
        lines.append(f"  {check_id:<18} {status}{note}{reason}")
    errored, ran = _errored(evidence)
    if errored:
        lines.append(
            f"  {len(errored)} of {len(ran)} checks that ran errored: {', '.join(errored)}"
        )
    return lines


def _errored(evidence: Evidence) -> tuple[list[str], list[str]]:
    """The checks that errored, and those that ran (neither not applicable nor missing)."""
    ran = [
        c
        for c, r in evidence.checks.items()
        if r.status not in ("not_applicable", "not_implemented")
    ]
    return [c for c in ran if evidence.checks[c].status == "error"], ran


def require_a_verdict(evidence: Evidence, out: Path) -> None:
    """Exit 2, never 0, when the evidence judges nothing: the model raised in the reference run,
    or every check that ran errored (the evidence stays written, for the record)."""
    errored, ran = _errored(evidence)
    failure = evidence.model_failure
    if failure is None and (not ran or len(errored) < len(ran)):
        return
    why = (
        f"the model raised {failure.error_type} in {failure.phase} of the reference run "
        f"(module {failure.module or '<root>'!r}): {failure.message}"
        if failure is not None
        else "every check that ran errored"
    )
    first = next((evidence.checks[c].reason for c in errored if evidence.checks[c].reason), None)
    raise CollectError(
        f"{why}; {len(errored)} of {len(ran)} checks errored, so the evidence written to {out} "
        "judges nothing" + (f" (first: {first})" if first and failure is None else ""),
        hint="fix what the errors name and collect again",
    )


def _json_summary(evidence: Evidence, out: Path) -> dict[str, Any]:
    return {
        "evidence": str(out),
        "model": {k: evidence.model.get(k) for k in ("name", "version", "digest")},
        "targets": evidence.targets,
        "model_failure": evidence.model_failure.model_dump() if evidence.model_failure else None,
        "compile": evidence.compile.model_dump() if evidence.compile else None,
        "errored": _errored(evidence)[0],
        "reused_phases": [p.phase for p in evidence.phases if p.reused],
        "model_metrics": evidence.model_metrics,
        "checks": {
            check_id: {
                "status": r.status,
                "reason": r.reason,
                "fail": sum(1 for i in r.items if i.status == "fail"),
                "warn": sum(1 for i in r.items if i.status == "warn"),
            }
            for check_id, r in evidence.checks.items()
        },
    }


@click.command("collect")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--spec",
    "spec_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="With a MONAI bundle folder as SPEC: the attest.yaml giving the probe and target "
    "[default: attest.yaml beside the bundle].",
)
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Where to write evidence.json.",
)
@click.option(
    "--merge", is_flag=True, help="Merge the evidence files given (one model, several targets)."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (as --progress none).")
@progress_option
@click.option(
    "--budget",
    default=None,
    metavar="DURATION",
    help="Plan the work to fit this time (e.g. 30m, 2h) from a calibration on the model, or "
    "refuse at the start naming the smallest budget that meets the floors; the evidence says "
    "what was reduced. Default: the spec's budget:, else the full work.",
)
@click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="ADDRESS",
    help="Collect on a Ray cluster, one task per target of --targets: auto, HOST:PORT of the "
    "head node, or local (start one here). Needs the ray extra.",
)
@click.option(
    "--targets",
    "targets_file",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --ray: targets.yaml, each target name mapped to its Ray resources.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Split the checks of one collect over this many processes (Ray tasks with --ray "
    "and no --targets); the figures are the same as in one process.",
)
@click.option(
    "--resume",
    "resume_dir",
    default=None,
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Continue a killed collect from its last finished phase, reusing the phases saved in "
    "its work folder DIR (refused, naming what differs, when the spec, weights, probe, "
    "settings or environment changed).",
)
@click.option(
    "--work-dir",
    default=None,
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Where each finished phase is saved for --resume (default: .attest-work/OUT_NAME/ "
    "beside OUT; removed once the evidence is written). With --ray --targets: the root under "
    "which each target's task keeps its own (shared storage lets a retry on another node "
    "resume; default: a folder in each node's temporary directory).",
)
@click.option(
    "--schedule-timeout",
    default="10m",
    show_default=True,
    metavar="DURATION",
    help="With --ray: fail a target that no node can start within this time.",
)
@collector_options
def collect(
    paths: tuple[Path, ...],
    spec_file: Path | None,
    out: Path,
    merge: bool,
    as_json: bool,
    quiet: bool,
    progress_mode: str,
    budget: str | None,
    ray_address: str | None,
    targets_file: Path | None,
    workers: int,
    resume_dir: Path | None,
    work_dir: Path | None,
    schedule_timeout: str,
    key_path: Path | None,
    collector_name: str | None,
    collector_role: str,
    target_name: str | None,
    require_signed: bool,
) -> None:
    """Profile the model of SPEC (attest.yaml, or a MONAI bundle folder with --spec or an
    attest.yaml beside it) and run every check; write evidence.

    The exported model.onnx and probe bundle (when the spec exports) are written next to
    the evidence file. With --merge, PATHS are evidence files of the same model from
    different hardware targets, merged into one. With --ray and --targets, SPEC is collected
    once per target on a Ray cluster: each target's evidence goes to OUT_STEM.targets/NAME/
    (for attest certify --evidence) and their merge to OUT. With --key, the evidence is
    signed: OUT_STEM.intoto.json, an in-toto statement over the evidence, spec, weights and
    probe naming the collector, host, hardware, times and dispatch (certify --evidence --trust
    checks it); without --key it is unsigned and says so. With --ray --targets each node
    signs its target's evidence with its own collector key (targets.yaml collector_key:, or
    ATTEST_COLLECTOR_KEY on the node): OUT_STEM.targets/NAME/evidence.intoto.json.
    """
    clock_started = time.perf_counter()  # a --budget counts from here: the user waits too
    signing = load_collector(
        key_path, collector_name, collector_role, target_name, merge, targets_file, require_signed
    )
    if targets_file is not None and ray_address is None:
        raise InputError(
            "--targets needs --ray",
            hint="attest collect attest.yaml --ray auto --targets targets.yaml -o evidence.json",
        )
    if ray_address is not None and targets_file is None and workers == 1:
        raise InputError(
            "--ray needs --targets (one task per target) or --workers N (one collect split "
            "over N tasks)"
        )
    if spec_file is not None and (merge or ray_address is not None):
        raise InputError("--spec goes with a MONAI bundle collected here, not --merge or --ray")
    if resume_dir is not None and (work_dir is not None or merge or ray_address is not None):
        raise InputError(
            "--resume goes with neither --work-dir (the folder resumed is the work folder), "
            "--merge nor --ray",
            hint="attest collect attest.yaml -o evidence.json --resume .attest-work/evidence.json",
        )
    if work_dir is not None and (budget is not None or workers != 1) and targets_file is None:
        raise InputError(
            "--work-dir cannot go with --budget or --workers: such a collect cannot be resumed "
            "(its phases depend on the time or the processes it had), so it keeps no work folder"
        )
    statement: Path | None = None
    signed_by: dict[str, str | None] | None = None
    if merge:
        if workers != 1 or work_dir is not None:
            raise InputError("--workers and --work-dir apply to collecting, not to --merge")
        evidence = _merge(paths, out, budget, ray_address)
    elif ray_address is not None and targets_file is not None:
        evidence, signed_by = _collect_on_ray(
            paths, out, budget, ray_address, targets_file, schedule_timeout,
            quiet or progress_mode == "none" or (as_json and progress_mode == "auto"),
            workers, work_dir, require_signed,
        )  # fmt: skip
    else:
        silent = quiet or progress_mode == "none"
        started = datetime.now(timezone.utc)
        evidence = _collect_here(
            paths, out, budget, silent, as_json, workers, ray_address, progress_mode, spec_file,
            work_dir=resume_dir or work_dir, resume=resume_dir is not None,
            started=clock_started,
        )  # fmt: skip
        say_overrun(evidence)
        if signing is not None:
            statement = sign_collected(
                out, _one_spec(paths), signing, evidence, started, workers, ray_address
            )
    signed = statement is not None or bool(signed_by and all(signed_by.values()))
    if as_json:
        echo_json(
            {**_json_summary(evidence, out), "signed": signed,
             "statement": str(statement) if statement else None,
             **({"signed_by": signed_by} if signed_by is not None else {})}
        )  # fmt: skip
    else:
        for line in _summary_lines(evidence, out):
            click.echo(line)
        if signed_by is not None:
            for line in target_signed_lines(signed_by):
                click.echo(line)
        else:
            click.echo(signed_summary(signing, statement, merge))
    require_a_verdict(evidence, out)


def _one_spec(paths: tuple[Path, ...]) -> Path:
    if len(paths) != 1:
        raise InputError(
            f"attest collect takes one spec file, got {len(paths)}",
            hint="attest collect attest.yaml -o evidence.json (or --merge a.json b.json -o all.json)",
        )
    return paths[0]


def _merge(paths: tuple[Path, ...], out: Path, budget: str | None, ray: str | None) -> Evidence:
    from attest.core.io import atomic_write_json
    from attest.evidence.merge import merge_evidence
    from attest.evidence.model import load_evidence

    if budget is not None or ray is not None:
        raise InputError("--budget and --ray apply to collecting, not to --merge")
    if len(paths) < 2:
        raise InputError(
            "--merge needs at least two evidence files",
            hint="attest collect --merge a.json b.json -o all.json",
        )
    evidence = merge_evidence([load_evidence(p) for p in paths], [str(p) for p in paths])
    atomic_write_json(out, evidence.model_dump(mode="json"))
    return evidence


def _collect_here(
    paths: tuple[Path, ...],
    out: Path,
    budget: str | None,
    quiet: bool,
    as_json: bool,
    workers: int = 1,
    ray_address: str | None = None,
    progress_mode: str = "auto",
    spec_file: Path | None = None,
    *,
    work_dir: Path | None = None,
    resume: bool = False,
    started: float | None = None,
) -> Evidence:
    from attest.collection import collect as run_collect
    from attest.core.progress_display import terminal_progress
    from attest.spec import load_spec
    from attest.spec.model import parse_budget

    spec = _one_spec(paths)
    loaded = load_spec(spec, spec=spec_file) if spec.is_dir() or spec_file else None
    if loaded is not None:  # nothing, not even a folder, is made inside a bundle
        from attest.spec.source import refuse_inside

        refuse_inside(loaded.folder, {"evidence": out})
    budget_s = parse_budget(budget)  # a bad --budget is refused before any work
    out.resolve().parent.mkdir(parents=True, exist_ok=True)
    heartbeat_s = heartbeat_seconds()
    with terminal_progress(
        quiet=quiet, as_json=as_json, mode=progress_mode, heartbeat_s=heartbeat_s
    ) as progress:
        # The export check's model.onnx and probe bundle go next to the evidence file, so the
        # folder is what `attest certify --evidence` needs from this machine.
        return run_collect(
            loaded or spec,
            out=out,
            progress=progress,
            budget_s=budget_s,
            output_dir=out.resolve().parent,
            workers=workers,
            ray_address=ray_address,
            work_dir=work_dir,
            resume=resume,
            started=started,
        )


def _collect_on_ray(
    paths: tuple[Path, ...],
    out: Path,
    budget: str | None,
    address: str,
    targets_file: Path,
    schedule_timeout: str,
    silent: bool,
    workers: int = 1,
    work_dir: Path | None = None,
    require_signed: bool = False,
) -> tuple[Evidence, dict[str, str | None]]:
    from datetime import timedelta

    from attest.collection.cluster.ray_dispatch import collect_on_ray
    from attest.collection.cluster.targets import load_targets
    from attest.core.times import parse_duration

    if budget is not None:
        raise InputError("--budget is not supported with --ray yet", hint="drop --budget")
    spec = _one_spec(paths)
    targets = load_targets(targets_file)
    timeout = parse_duration(
        schedule_timeout, option="--schedule-timeout", minimum=timedelta(seconds=1)
    )

    def say(message: str) -> None:
        if not silent:
            click.echo(message, err=True)

    result = collect_on_ray(
        spec,
        targets,
        address=address,
        out=out,
        say=say,
        schedule_timeout_s=timeout.total_seconds(),
        workers=workers,
        work_root=work_dir,
        require_signed=require_signed,
    )
    for name, path in result.per_target.items():
        say(f"target {name}: evidence {path}")
    return result.evidence, result.signed_by
