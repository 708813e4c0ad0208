"""The collect's own cost (phases: wall, CPU, peak RSS), memory headroom, and --budget plans."""

from __future__ import annotations

from pathlib import Path

import pytest
from _collect_models import MLP, make_spec

from attest.collection import collect, phase_name
from attest.collection import resources as res
from attest.collection.context import CheckSettings
from attest.errors import CollectError, InputError
from attest.spec.model import parse_budget

PROFILE = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]


def test_phase_names_follow_the_packages() -> None:
    assert phase_name("attest.collection.profile.topology:run") == "topology"
    assert phase_name("attest.collection.profile.profiler:run") == "profile"
    assert phase_name("attest.collection.gradients.runner:run") == "gradients"
    assert phase_name("attest.collection.ig.checks:run") == "ig"
    assert phase_name("attest.collection.training.runner:run") == "training"


def test_every_phase_records_time_cpu_and_peak_memory(tmp_path: Path) -> None:
    ev = collect(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"), runners=PROFILE)
    names = [p.phase for p in ev.phases]
    assert names == ["capture", "topology", "profile"]
    for phase in ev.phases:
        assert phase.duration_s >= 0 and phase.cpu_s >= 0
        assert phase.peak_rss_bytes is not None and phase.peak_rss_bytes > 10 * 2**20
        assert phase.peak_rss_bytes >= (phase.rss_end_bytes or 0) * 0.5
    profile = ev.phases[-1]
    assert profile.checks == ["determinism", "fidelity", "numerics", "thread_sensitivity"]
    for check_id in profile.checks:
        assert ev.checks[check_id].peak_rss_bytes == profile.peak_rss_bytes
    assert ev.budget is None  # no budget: the full work, and no plan recorded


def test_a_phase_peak_is_its_own_not_the_process_history() -> None:
    with res.PhaseMeter() as big:
        block = bytearray(300 * 2**20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
        del block
    with res.PhaseMeter() as small:
        pass
    assert big.usage.peak_rss_bytes is not None and small.usage.peak_rss_bytes is not None
    if big.usage.peak_method == "VmHWM":  # the kernel reset the peak between phases
        assert big.usage.peak_rss_bytes - small.usage.peak_rss_bytes > 250 * 2**20


def test_headroom_refuses_with_the_figure_and_the_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(res, "available_memory", lambda: 2 * 2**30)
    res.require_headroom(2**30, "the float64 pass")  # fits: nothing happens
    with pytest.raises(CollectError) as info:
        res.require_headroom(5 * 2**30, "the float64 pass")
    text = str(info.value) + " " + (info.value.hint or "")
    assert "5.00 GiB" in text and "2.00 GiB" in text and "--budget" in text and "probe" in text


def test_out_of_memory_in_a_runner_is_a_clear_error_not_a_check_error(tmp_path: Path) -> None:
    def hungry(ctx: object) -> list:
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 99999999999 bytes"
        )

    with pytest.raises(CollectError) as info:
        collect(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"), runners=[hungry])
    assert "ran out of memory" in str(info.value) and "--budget" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("text", "seconds"), [("30m", 1800.0), ("2h", 7200.0), ("90s", 90.0), (600, 600.0)]
)
def test_budgets_parse(text: str | int, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["soon", "0s", "5s", "-3m", "31d", "", True, [1]])
def test_bad_budgets_are_input_errors(text: object) -> None:
    with pytest.raises(InputError):
        parse_budget(text)  # type: ignore[arg-type]


def test_collect_with_a_budget_records_the_plan(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, MLP, spec_extra="repeats: 20\nbudget: 1h\n")
    ev = collect(spec, runners=PROFILE)
    assert ev.budget is not None and ev.budget.limit_s == 3600.0 and ev.budget.unit_s > 0
    assert ev.budget.elapsed_s is not None and ev.budget.calibration is not None
    # the MLP's forward+backward is microseconds: an hour is plenty even on a starved
    # machine, nothing reduced
    assert ev.budget.full_work
    assert ev.checks["determinism"].parameters.get("repeats", 20) == 20


def test_collect_budget_argument_plans_less_work_and_leaves_the_callers_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import attest.collection as collection
    from attest.collection.budget_calibration import Calibration
    from attest.spec import load_spec

    # as if a repeat took 4 s: 20 repeats cannot fit 60 s, the floor's 5 can (unless the
    # start took half a minute), the plan lowers them
    def slow(ctx: object, *, capture_s: float, float64_s: float) -> Calibration:
        return Calibration(0.01, 4.0, capture_s, 0.02, 0.0)

    monkeypatch.setattr(collection, "calibrate", slow)
    loaded = load_spec(make_spec(tmp_path, MLP, spec_extra="repeats: 20\n"))
    settings = CheckSettings()
    ev = collect(loaded, runners=PROFILE, budget_s=60.0, settings=settings)
    assert ev.budget is not None
    # the plan (from the calibration) asked for less than the full work ...
    assert ev.budget.estimate_planned_s < ev.budget.estimate_full_s
    # ... and the profile then made as many runs as the measured repeats fitted: this tiny
    # model's real repeats take milliseconds, so it may go back up to the spec's 20 (never
    # below the floor); the determinism check reports the runs actually made
    reduced = {r.setting: r.planned for r in ev.budget.reductions}
    made = reduced.get("repeats", 20)
    assert 5 <= made <= 20
    assert ev.checks["determinism"].parameters["repeats"] == made
    assert loaded.repeats == 20 and settings == CheckSettings()  # plans run on copies


def test_collect_refuses_a_phase_the_machine_has_no_memory_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attest.collection.profile import profiler

    real_capture = profiler.capture_reference

    def capture_needing_64_mib(ctx: object) -> object:  # a run 0 that surely raises the peak
        block = bytearray(64 * 2**20)
        block[::4096] = b"x" * len(block[::4096])
        result = real_capture(ctx)  # type: ignore[arg-type]
        del block
        return result

    monkeypatch.setattr(profiler, "capture_reference", capture_needing_64_mib)
    monkeypatch.setattr(res, "available_memory", lambda: 1)  # one byte free after run 0
    out = tmp_path / "evidence.json"
    with pytest.raises(CollectError) as info:
        collect(make_spec(tmp_path / "s", MLP, spec_extra="repeats: 2\n"), runners=PROFILE, out=out)
    assert "not enough memory for the topology checks" in str(info.value)
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("counter", [True, False], ids=["VmHWM", "sampled"])
def test_a_meter_inside_a_phase_leaves_the_phase_its_whole_peak(
    counter: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check measured inside its phase resets the kernel's counter: the phase's peak still
    counts what was reached before (issue #38: each gradient check's own peak); where the
    counter cannot be reset, the meters sample, and the phase still takes the check's."""
    if not counter:
        monkeypatch.setattr(res, "_reset_peak", lambda: False)
    with res.PhaseMeter() as phase:
        with res.PhaseMeter() as heavy:
            block = bytearray(300 * 2**20)
            block[::4096] = b"x" * len(block[::4096])
            del block
        with res.PhaseMeter() as light:
            pass
    peaks = [m.usage.peak_rss_bytes for m in (phase, heavy, light)]
    assert all(p is not None for p in peaks)
    assert phase.usage.peak_rss_bytes >= heavy.usage.peak_rss_bytes  # type: ignore[operator]
    assert res.PhaseMeter._open == []  # every meter left is forgotten
