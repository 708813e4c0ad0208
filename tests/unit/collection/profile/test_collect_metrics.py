"""The profiler's comparison functions: exact bits, relative deviation, blockwise sums."""

from __future__ import annotations

import math

import torch

from attest.collection.profile import op_metrics as metrics
from attest.collection.profile.op_metrics import (
    bits_equal,
    relative_deviation,
    relative_error,
    squared_error_sums,
)


def test_bits_equal_decides_on_raw_bits_in_every_layout() -> None:
    a = torch.randn(4, 6)
    assert bits_equal(a, a.clone())
    assert bits_equal(a.t(), a.t().contiguous())  # different strides, same values
    b = a.clone()
    b[2, 3] = torch.nextafter(b[2, 3], torch.tensor(math.inf))
    assert not bits_equal(a, b)
    assert not bits_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert bits_equal(torch.tensor([math.nan]), torch.tensor([math.nan]))
    assert not bits_equal(a, a.double())
    assert not bits_equal(a, a.reshape(6, 4))


def test_bits_equal_and_deviation_read_lazy_conjugates_as_their_values() -> None:
    z = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    assert bits_equal(z.conj(), z.conj().resolve_conj())
    assert not bits_equal(z.conj(), z)
    assert relative_deviation(z.conj(), z.conj().resolve_conj()) == 0.0
    assert relative_deviation(z.conj(), z) > 0.0


def test_blockwise_sums_equal_the_whole_tensor_sums() -> None:
    torch.manual_seed(0)
    a = torch.randn(100_003)  # not a multiple of any block size
    ref = a.double() + 1e-7 * torch.randn(100_003, dtype=torch.float64)
    diff = a.double() - ref
    expected = (float(diff @ diff), float(ref @ ref))
    sums = squared_error_sums(a, ref)
    assert sums is not None
    assert math.isclose(sums[0], expected[0], rel_tol=1e-12)
    assert math.isclose(sums[1], expected[1], rel_tol=1e-12)
    ref[77_777] = math.inf
    assert squared_error_sums(a, ref) is None
    assert relative_error([(a, ref)]) is None


def test_relative_deviation_over_blocks_finds_the_largest_difference() -> None:
    ref = torch.ones(3 * metrics._MIN_BLOCK + 5)
    a = ref.clone()
    a[-1] = 1.5  # in the last, partial block
    a[10] = 1.25
    assert relative_deviation(a, ref) == 0.5
    a[-2] = math.nan
    assert relative_deviation(a, ref) == math.inf


# ---------------------------------------------------------------- timing spread per operator


def test_timing_spread_is_the_interquartile_range_and_p95_with_interpolation() -> None:
    from attest.collection.rows import timing_spread

    # inclusive quartiles of 100..500: 200 and 400; p95 at rank 3.8 of 0..4: 400 + 0.8 * 100
    assert timing_spread([500, 100, 400, 200, 300]) == (200, 480)
    assert timing_spread([100, 300]) == (100, 290)  # two runs: quartiles 150, 250
    assert timing_spread([7, 7, 7]) == (0, 7)
    assert timing_spread([7]) == (None, None)  # one run has no spread
    assert timing_spread([]) == (None, None)


def test_operator_rows_carry_the_spread_and_merging_keeps_the_widest() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from attest.collection.capture.run import RunOutcome
    from attest.collection.profile.measures import OpMeasure, Profile
    from attest.collection.rows import operator_rows
    from attest.evidence.merge import merge_evidence
    from attest.evidence.model import Evidence
    from attest.evidence.rollup import module_rows

    def measure(op_id: int, forward: list[int], backward: list[int]) -> OpMeasure:
        m = OpMeasure(op_id, "aten.relu.default", "act", [[2]], ["torch.float32"], False)
        m.forward_ns, m.backward_ns = forward, backward
        return m

    ops = [measure(0, [100, 200, 300, 400, 500], [1000, 3000]), measure(1, [50], [])]
    profile = Profile(precision="float32", device="cpu", ops=ops, reference=RunOutcome(ops=[]))
    ctx = cast(Any, SimpleNamespace(topology_ok=True, topology_reason=None))
    rows = operator_rows(profile, ctx, "cpu:x86_64:avx2")
    first, second = rows
    assert (first.forward_ns, first.forward_ns_iqr, first.forward_ns_p95) == (300, 200, 480)
    assert (first.backward_ns, first.backward_ns_iqr, first.backward_ns_p95) == (2000, 1000, 2900)
    assert second.forward_ns == 50 and second.forward_ns_iqr is None
    assert second.backward_ns is None and second.backward_ns_p95 is None
    (module,) = module_rows(rows, [])
    assert module.forward_ns == 350 and "forward_ns_p95" not in type(module).model_fields

    def evidence(target: str, p95: int) -> Evidence:
        row = first.model_copy(update={"forward_ns_p95": p95, "hardware_affinity_mask": [target]})
        return Evidence(
            tool_version="0",
            created_at="now",
            model={"name": "m"},
            targets=[target],
            operators=[row],
        )

    merged = merge_evidence([evidence("cpu", 480), evidence("cuda:sm_90", 900)])
    (row,) = merged.operators
    assert row.forward_ns_p95 == 900
    assert row.per_target["cpu"]["forward_ns_p95"] == 480
    assert row.per_target["cuda:sm_90"]["forward_ns_iqr"] == 200


def test_a_policy_can_hold_operators_to_a_timing_spread() -> None:
    from attest.evidence.model import CheckResult, Evidence, OperatorRow
    from attest.policy.engine import evaluate
    from attest.policy.model import parse_policy

    rows = [
        OperatorRow(id=0, op="aten.mm.default", module="fc", forward_ns=1000, forward_ns_p95=1200),
        OperatorRow(id=1, op="aten.relu.default", module="act", forward_ns=90, forward_ns_p95=5000),
        OperatorRow(id=2, op="aten.relu.default", module="act"),  # repeats: 1, no spread
    ]
    # the rows' check, computed (so with a summary, as a collector writes it: evidence whose
    # claims its figures contradict is refused, attest.evidence.consistency)
    timed = CheckResult(check="determinism", status="computed", summary={"runs": 3})
    ev = Evidence(tool_version="0", created_at="now", operators=rows, checks={"determinism": timed})
    rule = {
        "id": "jitter",
        "check": "determinism",
        "source": "operators",
        "metric": "forward_ns_p95",
        "comparator": "<=",
        "threshold": 2000,
        "required": False,
    }
    findings = evaluate(ev, parse_policy({"id": "p", "version": "1", "rules": [rule]}))
    verdicts = {f.subject.operator_id: f.verdict for f in findings.findings}
    assert verdicts[0] == "pass" and verdicts[1] == "fail" and verdicts.get(2) != "fail"


def test_the_fast_finite_test_never_hides_a_nan_or_inf() -> None:
    import math

    from attest.collection.profile.numerics import _surely_finite, find_nonfinite

    t = torch.randn(64, 64)
    assert _surely_finite(t) and find_nonfinite([t]) is None
    for bad in (math.nan, math.inf, -math.inf):
        u = t.clone()
        u[3, 5] = bad
        assert not _surely_finite(u)
        found = find_nonfinite([None, u])
        assert found is not None and found.first_index == [3, 5] and found.which == 1
    # finite but the sum overflows: the exact scan decides, and finds nothing
    big = torch.full((8,), 3e38)
    assert not _surely_finite(big) and find_nonfinite([big]) is None
    half = torch.full((4096,), 60000.0, dtype=torch.float16)  # sums past float16's range
    assert _surely_finite(half) and find_nonfinite([half]) is None
    z = torch.zeros(4, dtype=torch.complex64)
    z[1] = complex(0, math.inf)
    assert not _surely_finite(z) and find_nonfinite([z]) is not None
