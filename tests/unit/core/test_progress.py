"""The progress module (attest.core.progress): messages, elapsed time and the estimate of time left."""

from __future__ import annotations

import io
import itertools
import sys
import threading
import time

import pytest

from attest.core.progress import (
    Tracker,
    format_duration,
    parse,
    plan_message,
    print_stages,
    step_message,
)
from attest.core.progress_display import terminal_progress
from attest.core.progress_log import HEARTBEAT_PREFIX, plain_progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_step_messages_round_trip_and_counts_within_a_stage_are_read() -> None:
    read = parse(step_message(5, 18, "checks: gradchecks"))
    assert (read.text, read.steps, read.within) == ("checks: gradchecks", (5, 18), None)
    assert parse("determinism run 3/20").within == (3, 20)
    assert parse("checks: kinks (2/6)").within == (2, 6)
    plain = parse("loaded digits-cnn 1.0.0")
    assert (plain.steps, plain.within) == (None, None)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 7.9, 65, 3723, -3)] == [
        "0:00",
        "0:07",
        "1:05",
        "1:02:03",
        "0:00",
    ]


def test_elapsed_and_time_left_from_a_fake_clock() -> None:
    clock = FakeClock()
    tracker = Tracker(clock)
    assert tracker.remaining() is None and tracker.remaining_text() == "estimating…"
    tracker.update(step_message(0, 18, "capturing operators"))
    clock.now += 4
    assert tracker.elapsed() == 4.0
    assert tracker.remaining() is None, "no step finished yet: no basis for an estimate"
    assert tracker.remaining_text() == "estimating…"

    tracker.update(step_message(2, 18, "checks: profiler"))
    clock.now += 6  # 10 s for 2 of 18 steps: 5 s a step, 16 to go
    assert tracker.remaining() == pytest.approx(80.0)
    assert tracker.remaining_text() == "about 1:20 left"
    assert tracker.steps_text() == "2/18 checks"

    # a message without counts changes the stage and keeps the counts
    tracker.update("determinism run 3/20")
    assert (tracker.stage, tracker.done, tracker.total) == ("determinism run 3/20", 2, 18)
    assert tracker.within == (3, 20)
    clock.now += 10  # still 2 steps in 20 s: the estimate grows with the wait
    assert tracker.remaining() == pytest.approx(160.0)

    tracker.update(step_message(18, 18, "assembling the evidence"))
    assert tracker.remaining() == 0.0 and tracker.remaining_text() == "finishing"
    tracker.finish()
    clock.now += 100
    assert tracker.elapsed() == 20.0, "the clock stops when the run is over"
    assert tracker.remaining_text() == "done" and tracker.stage == "finished"
    assert "0:20 elapsed" in tracker.line()


def test_time_left_is_rounded_up_while_work_remains() -> None:
    clock = FakeClock()
    tracker = Tracker(clock)
    tracker.update(step_message(17, 18, "checks: export"))
    clock.now += 0.5
    assert tracker.remaining_text() == "about 0:01 left"


def test_stage_text_cannot_steer_the_terminal() -> None:
    tracker = Tracker(FakeClock())
    tracker.update("loaded \x1b[2Kevil\rname 1.0")
    assert "\x1b" not in tracker.stage and "\r" not in tracker.stage


def test_print_stages_prints_one_line_per_stage() -> None:
    stream = io.StringIO()
    progress = print_stages(stream, FakeClock())
    for message in ("loaded m 1", "determinism run 2/3", "determinism run 3/3"):
        progress(message)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "determinism run 3/3" in lines[1]


@pytest.mark.parametrize(
    ("stream", "quiet", "as_json", "mode"),
    [
        (FakeTerminal(), True, False, "auto"),  # --quiet
        (FakeTerminal(), False, True, "auto"),  # --json
        (io.StringIO(), False, False, "none"),  # --progress none
        (io.StringIO(), True, False, "plain"),  # --quiet wins
    ],
    ids=["quiet", "json", "none", "quiet-plain"],
)
def test_nothing_shown_when_asked_for_nothing(
    stream: io.StringIO, quiet: bool, as_json: bool, mode: str
) -> None:
    with terminal_progress(quiet=quiet, as_json=as_json, mode=mode, stream=stream) as progress:
        assert progress is None
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("stream", "as_json", "mode"),
    [
        (io.StringIO(), False, "auto"),
        (FakeTerminal(), False, "plain"),
        (io.StringIO(), True, "plain"),
    ],
    ids=["not-a-terminal", "plain-on-a-terminal", "plain-with-json"],
)
def test_plain_lines_off_a_terminal_or_when_asked(
    stream: io.StringIO, as_json: bool, mode: str
) -> None:
    with terminal_progress(
        as_json=as_json, mode=mode, stream=stream, clock=FakeClock()
    ) as progress:
        assert progress is not None
        progress(step_message(5, 18, "checks: gradients"))
    assert stream.getvalue().splitlines() == [
        "  checks: gradients | 5/18 checks | 0:00 elapsed | about 0:01 left",
        "  finished | 5/18 checks | 0:00 elapsed | done",
    ]


def test_a_terminal_gets_a_live_display() -> None:
    pytest.importorskip("rich")
    stream = FakeTerminal()
    with terminal_progress(stream=stream) as progress:
        assert progress is not None
        progress(step_message(0, 18, "capturing operators"))
        progress(step_message(5, 18, "checks: gradchecks"))
    shown = stream.getvalue()
    assert "18 checks" in shown and "finished" in shown and "done" in shown


def test_a_failed_run_says_stopped() -> None:
    pytest.importorskip("rich")
    stream = FakeTerminal()
    with pytest.raises(RuntimeError), terminal_progress(stream=stream) as progress:
        assert progress is not None
        progress(step_message(3, 18, "checks: profiler"))
        raise RuntimeError("boom")
    assert "stopped" in stream.getvalue()


def test_without_rich_a_terminal_gets_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("rich", "rich.console", "rich.progress", "rich.text"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    stream = FakeTerminal()
    with terminal_progress(stream=stream, clock=FakeClock()) as progress:
        assert progress is not None
        progress(step_message(5, 18, "checks: gradchecks"))
    assert stream.getvalue().splitlines() == [
        "  checks: gradchecks | 5/18 checks | 0:00 elapsed | about 0:01 left",
        "  finished | 5/18 checks | 0:00 elapsed | done",
    ]


def test_the_estimate_weighs_phases_by_their_planned_cost() -> None:
    clock = FakeClock()
    tracker = Tracker(clock)
    tracker.update(step_message(0, 18, "capturing operators"))
    clock.now += 50  # capture time is not part of the rate
    message = plan_message({"topology": 1.0, "profile": 9.0, "gradients": 10.0}, 1.0)
    assert parse(message).plan == {"topology": 1.0, "profile": 9.0, "gradients": 10.0}
    tracker.update(message)
    assert tracker.stage == "capturing operators", "a plan starts no stage"
    tracker.update(step_message(0, 18, "checks: topology"))
    # before any phase finished: the planned seconds (20 units of 1 s)
    assert tracker.remaining() == pytest.approx(20.0)
    clock.now += 1
    tracker.update(step_message(1, 18, "checks: profile"))
    # one unit in 1 s: 19 to go, whatever the count of checks (1 of 18) would say
    assert tracker.remaining() == pytest.approx(19.0)
    tracker.update("determinism run 6/10")  # runs 1-5 of 10 done: half the profile phase
    clock.now += 4.5
    assert tracker.units() == pytest.approx((5.5, 20.0))
    assert tracker.remaining() == pytest.approx((5.5 + 2.0) / 7.5 * 14.5)
    assert tracker.line().startswith("checks: profile | determinism run 6/10 | 1/18 checks")
    tracker.update(step_message(9, 18, "checks: gradients"))
    clock.now += 4
    assert tracker.units() == pytest.approx((10.0, 20.0))
    assert tracker.remaining() == pytest.approx(11.5 / 12.0 * 10.0)
    tracker.update(step_message(18, 18, "assembling the evidence"))
    assert tracker.remaining() == 0.0 and tracker.remaining_text() == "finishing"


def test_the_estimate_does_not_swing_when_a_stage_without_counts_follows_the_repeats() -> None:
    # the events of a quiet resnet18 collect at clinical-strict (bench_certify.py, 2026-12-05):
    # it printed "about 1:07 left" after run 100/100, then "about 2:22:20 left" as the
    # thread-count run began (its stage has no k/N, so the 99 repeats done counted as none),
    # then "about 1:07 left" again as the gradients phase began
    clock = FakeClock()
    tracker = Tracker(clock)
    tracker.update(step_message(0, 22, "capturing operators"))
    clock.now += 17
    tracker.update(plan_message({"topology": 0.4, "profile": 124, "gradients": 23, "ig": 35}, 0.87))
    tracker.update(step_message(0, 22, "checks: topology"))
    tracker.update(step_message(1, 22, "checks: profile"))
    tracker.update("float64 fidelity")
    seen = []
    for run, at in ((51, 60.0), (100, 55.0)):
        clock.now += at
        tracker.update(f"determinism run {run}/100")
        seen.append(tracker.remaining())
    clock.now += 1
    tracker.update("thread sensitivity")
    seen.append(tracker.remaining())
    clock.now += 2
    tracker.update(step_message(5, 22, "checks: gradients"))
    seen.append(tracker.remaining())
    tracker.update(step_message(5, 22, "checks: gradcheck/000"))  # a stage within the phase
    seen.append(tracker.remaining())
    assert all(s is not None for s in seen)
    after_repeats, threads, gradients = seen[1], seen[2], seen[3]
    assert threads == pytest.approx(after_repeats, rel=0.1), seen  # no swing
    assert gradients <= threads and seen[4] == pytest.approx(gradients, rel=0.01)
    # sane: the phases left (58 units) at the rate measured so far (about 1.1 s a unit)
    assert 40 < threads < 100, seen
    assert all(b <= a * 1.1 for a, b in itertools.pairwise(seen)), seen


def test_a_short_interval_in_a_phase_without_counts_does_not_set_the_rate_alone() -> None:
    # a small model under --budget: 420 planned units of 35 ms (14.7 s); 0.6 s into the first
    # phase (no k/N within it) the estimate said "about 2:05 left" from the rate of that
    # interval against a prior of two units
    clock = FakeClock()
    tracker = Tracker(clock)
    tracker.update(plan_message({"topology": 20.0, "profile": 400.0}, 0.035))
    tracker.update(step_message(0, 22, "checks: topology"))
    clock.now += 0.6
    tracker.update("budget plan: profile 14 s; 7 s spent of 40 s")
    left = tracker.remaining()
    assert left is not None and 14.7 <= left < 2 * 14.7


def test_a_garbled_plan_is_a_plain_stage() -> None:
    assert parse("plan: topology x; unit 1 s").plan is None
    assert parse("plan: topology inf; unit 1 s").plan is None


def test_the_heartbeat_repeats_the_last_state_and_stops_with_the_run() -> None:
    stream = io.StringIO()
    with plain_progress(stream, heartbeat_s=0.05) as progress:
        progress(step_message(3, 18, "checks: profile"))
        progress("determinism run 2/20")  # a step within: no line of its own
        deadline = time.monotonic() + 10
        while stream.getvalue().count(HEARTBEAT_PREFIX) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    lines = stream.getvalue().splitlines()
    beats = [line for line in lines if line.startswith("  " + HEARTBEAT_PREFIX)]
    assert lines[0].startswith("  checks: profile | 3/18 checks")
    assert len(beats) >= 2 and "determinism run 2/20" in beats[-1]
    assert lines[-1].startswith("  finished") and lines[-1].endswith("done")
    time.sleep(0.2)
    assert stream.getvalue().splitlines() == lines, "nothing printed after the closing line"
    assert not any(t.name == "attest-progress-heartbeat" for t in threading.enumerate())


def test_a_run_that_raises_closes_with_stopped() -> None:
    stream = io.StringIO()
    with pytest.raises(RuntimeError), plain_progress(stream, heartbeat_s=60) as progress:
        progress(step_message(3, 18, "checks: profile"))
        raise RuntimeError("boom")
    assert stream.getvalue().splitlines()[-1].endswith("stopped")
