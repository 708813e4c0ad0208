"""The operator profiler on small models whose answers are known."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from _collect_models import LINEAR_RELU, MLP, make_spec

from attest.collection import collect
from attest.collection.capture.run import run_model
from attest.collection.profile.op_metrics import UNIT_ROUNDOFF, stability_score
from attest.errors import CollectError
from attest.evidence.model import Evidence
from attest.spec import load_spec

MINE = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]


def run(path: Path) -> Evidence:
    return collect(path, runners=MINE)


def row(ev: Evidence, op: str, module: str | None = None) -> object:
    return next(r for r in ev.operators if r.op == op and (module is None or r.module == module))


def test_mlp_float32_fidelity_above_99_99(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, MLP))
    fid = ev.checks["fidelity"]
    assert fid.status == "computed"
    assert fid.summary["min_fidelity_pct"] > 99.99
    assert fid.summary["min_local_fidelity_pct"] > 99.99
    # not a constant: float32 rounding is visible against float64
    assert fid.summary["min_fidelity_pct"] < 100.0
    assert all(
        r.fidelity_pct is not None and r.local_fidelity_pct is not None for r in ev.operators
    )


LN_MODEL = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        with torch.no_grad():
            # a residual stream with a large common offset and a small spread, as deep
            # transformers have: a LayerNorm must subtract the mean before normalizing
            self.proj.weight.mul_(0.05)
            self.proj.bias.fill_(40.0)

    def forward(self, x):
        return self.norm(self.proj(x))

def build():
    return nn.Sequential(Block(), nn.Linear(16, 4))
"""


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_layernorm_in_half_precision_has_lower_local_fidelity_than_linear(
    tmp_path: Path, precision: str
) -> None:
    path = make_spec(
        tmp_path, LN_MODEL, x=torch.randn(8, 16), spec_extra=f"precision: {precision}\nrepeats: 2\n"
    )
    ev = run(path)
    linear = row(ev, "aten.addmm.default", "0.proj")
    norm = row(ev, "aten.native_layer_norm.default", "0.norm")
    assert linear.local_fidelity_pct is not None and norm.local_fidelity_pct is not None
    lin_err = 100.0 - linear.local_fidelity_pct
    norm_err = 100.0 - norm.local_fidelity_pct
    assert norm_err > 10 * lin_err, (linear.local_fidelity_pct, norm.local_fidelity_pct)
    assert ev.checks["fidelity"].summary["min_local_fidelity_module"] == "0.norm"


def test_memory_bytes_of_linear_then_relu_are_exact(tmp_path: Path) -> None:
    # Linear(4, 3) on x (2, 4) that requires grad: addmm saves x (2*4*4 = 32 bytes, an
    # activation) and weight.t() (3*4*4 = 48 bytes, a parameter); relu saves its result
    # (2*3*4 = 24 bytes). aten.t saves nothing.
    ev = run(make_spec(tmp_path, LINEAR_RELU, x=torch.randn(2, 4), spec_extra="repeats: 2\n"))
    ops = [
        (r.op, r.saved_activation_bytes, r.saved_parameter_bytes, r.memory_delta_bytes)
        for r in ev.operators
    ]
    assert ops == [
        ("aten.t.default", 0, 0, 0),
        ("aten.addmm.default", 32, 48, 32),
        ("aten.relu.default", 24, 0, 24),
    ]
    assert ev.model_metrics["saved_activation_bytes"] == 56
    assert ev.model_metrics["saved_parameter_bytes"] == 48
    # At the end of forward only relu's output (24 bytes, saved by relu and returned) is
    # alive: nothing holds the addmm output once relu has run (x existed before the run).
    assert ev.model_metrics["forward_memory_delta_bytes"] == 24
    # while relu runs, addmm's output (24) and relu's output (24) are both alive
    assert ev.model_metrics["peak_memory_bytes"] >= 48


def test_clean_model_is_bit_exact(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, MLP, spec_extra="repeats: 3\n"))
    det = ev.checks["determinism"]
    assert det.summary["bit_exact_reproducibility"] == 1.0
    assert det.summary["nondeterministic_operators"] == 0
    assert all(r.stability_score == 100.0 and r.bit_exact_rate == 1.0 for r in ev.operators)
    assert all(i.status == "pass" for i in det.items)
    assert all(r.output_sha256 and len(r.output_sha256) == 64 for r in ev.operators)


FLAKY = """
import torch
from torch import nn

CALLS = [0]

class Jitter(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        return x * (1.0 + 1e-6 * (CALLS[0] % 2))

def build():
    return nn.Sequential(nn.Linear(8, 8), Jitter(), nn.Linear(8, 3))
"""


def test_nondeterministic_operator_is_found_with_its_module(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, FLAKY, spec_extra="repeats: 3\n"))
    det = ev.checks["determinism"]
    assert det.summary["bit_exact_reproducibility"] < 1.0
    # gradients of every earlier operator inherit the difference; the origin is the mul
    origins = [r for r in ev.operators if r.nondeterminism_origin]
    assert [(r.op, r.module) for r in origins] == [("aten.mul.Tensor", "1")]
    assert det.summary["first_origin_module"] == "1"
    first = origins[0]
    assert first.bit_exact_rate == pytest.approx(2 / 3)
    # d is about 1e-6 relative: a few dozen unit roundoffs of float32
    assert 60.0 < first.stability_score < 95.0
    assert first.max_relative_deviation == pytest.approx(1e-6, rel=0.2)
    inherited = [
        r
        for r in ev.operators
        if r.bit_exact_rate is not None and r.bit_exact_rate < 1 and r.id != first.id
    ]
    assert inherited and all(not r.nondeterminism_origin for r in inherited)


RANDOM = """
import torch
from torch import nn

class Noisy(nn.Module):
    def forward(self, x):
        return x + 0.01 * torch.randn_like(x)

def build():
    return nn.Sequential(nn.Linear(8, 8), Noisy(), nn.Linear(8, 3))
"""


def test_random_operator_is_reported_even_under_a_fixed_seed(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, RANDOM, spec_extra="repeats: 2\n"))
    det = ev.checks["determinism"]
    assert det.summary["bit_exact_reproducibility"] == 1.0  # the seed hides it...
    assert det.summary["random_operators"] == 1  # ...but it is reported
    rnd = next(r for r in ev.operators if r.random)
    assert rnd.module == "1" and rnd.op == "aten.randn_like.default"
    item = next(i for i in det.items if i.subject.operator_id == rnd.id)
    assert item.status == "fail" and item.metrics["random_op"] is True


BRANCHY = """
import torch
from torch import nn

class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x):
        if x.sum() > 0:
            return self.a(x)
        return self.b(x)

def build():
    return nn.Sequential(nn.Linear(8, 8), Router(), nn.Linear(8, 3))
"""


def test_data_dependent_control_flow_fails_topology(tmp_path: Path) -> None:
    x = torch.zeros(3, 8)
    x[0] += 1.0
    x[1] -= 1.0
    x[2] += 2.0
    # first Linear is the identity so the sign survives
    ev = run(make_spec(tmp_path, BRANCHY, x=x, spec_extra="repeats: 2\n"))
    topo = ev.checks["topology"]
    assert topo.summary["diverging_inputs"] >= 1
    bad = [i for i in topo.items if i.status == "fail"]
    assert bad and all(i.subject.module == "1" for i in bad)
    assert bad[0].subject.op is not None and "1" in bad[0].message
    det = ev.checks["determinism"]
    assert det.reason and "topology" in det.reason
    assert all(i.status == "not_computed" for i in det.items if i.subject.kind == "operator")
    assert all(r.stability_score is None and "determinism" in r.not_computed for r in ev.operators)


def test_same_path_for_every_input_passes_topology(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"))
    assert ev.checks["topology"].summary["diverging_inputs"] == 0
    assert all(i.status == "pass" for i in ev.checks["topology"].items)


LOGNET = """
import torch
from torch import nn

class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)

def build():
    return nn.Sequential(nn.Identity(), Log(), nn.Linear(4, 2))
"""


def test_nan_is_located_by_operator_module_and_index(tmp_path: Path) -> None:
    x = torch.rand(3, 4) + 0.5
    x[1, 2] = -1.0
    ev = run(make_spec(tmp_path, LOGNET, x=x, spec_extra="repeats: 2\n"))
    num = ev.checks["numerics"]
    assert num.summary["nan"] is True
    origin = next(
        i for i in num.items if i.metrics.get("origin") and i.metrics.get("tensor") == "output"
    )
    assert (origin.subject.op, origin.subject.module, origin.subject.indices) == (
        "aten.log.default",
        "1",
        [1, 2],
    )
    assert origin.status == "fail" and origin.metrics["nan_count"] == 1
    assert num.summary["first_origin_module"] == "1"


def test_finite_model_has_no_numerics_findings(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"))
    num = ev.checks["numerics"]
    assert num.summary["nonfinite_operators"] == 0 and [i.status for i in num.items] == ["pass"]


RAISES_FORWARD = """
import torch
from torch import nn

class Broken(nn.Module):
    def forward(self, x):
        raise RuntimeError("sensor calibration missing")

def build():
    return nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), Broken()))
"""

RAISES_IN_OP = """
import torch
from torch import nn

def build():
    return nn.Sequential(nn.Linear(4, 4), nn.Linear(5, 2))
"""

RAISES_BACKWARD = """
import torch
from torch import nn

class Bad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise ValueError("backward not supported")

class Wrap(nn.Module):
    def forward(self, x):
        return Bad.apply(x)

def build():
    return nn.Sequential(nn.Linear(4, 4), Wrap(), nn.Linear(4, 2))
"""


RAISING = pytest.mark.parametrize(
    ("source", "phase", "module", "op", "text"),
    [
        (RAISES_FORWARD, "forward", "1.1", None, "sensor calibration missing"),
        (RAISES_IN_OP, "forward", "1", "aten.addmm.default", "shapes cannot be multiplied"),
        (RAISES_BACKWARD, "backward", "1", "aten.mul.Tensor", "backward not supported"),
    ],
    ids=["python-raise", "op-raise", "backward-raise"],
)


@RAISING
def test_raising_model_is_refused_by_the_preflight_saying_where(
    tmp_path: Path, source: str, phase: str, module: str, op: str | None, text: str
) -> None:
    """Before any check: the precision, the phase, the deepest module, the error."""
    with pytest.raises(CollectError) as info:
        run(make_spec(tmp_path, source, x=torch.randn(2, 4), spec_extra="repeats: 2\n"))
    message = info.value.message
    assert f"the model cannot run its probe (2, 4) in float32: {phase} raised" in message
    assert f"in module {module!r}" in message and text in message
    assert info.value.exit_code == 2 and info.value.hint


@RAISING
def test_raising_model_in_the_reference_run_says_where(
    tmp_path: Path, source: str, phase: str, module: str, op: str | None, text: str
) -> None:
    """Run 0 (which the preflight now guards) still names the operator, for a model that
    raises there only."""
    spec = load_spec(make_spec(tmp_path, source, x=torch.randn(2, 4)))
    failure = run_model(spec.build_model(), spec.inputs, spec).failure
    assert failure is not None
    assert (failure.phase, failure.module) == (phase, module)
    if op is not None:
        assert failure.op is not None and op in failure.op
    assert text in failure.message


def test_thread_sensitivity_compares_two_thread_counts(tmp_path: Path) -> None:
    ev = run(make_spec(tmp_path, MLP, spec_extra="repeats: 2\nthreads: 2\n"))
    ts = ev.checks["thread_sensitivity"]
    assert ts.status == "computed" and ts.parameters["threads"] == [2, 1]
    assert isinstance(ts.summary["model_changed"], bool)
    assert all(r.thread_sensitive is not None for r in ev.operators)
    assert ev.environment["threads"] == 2


@pytest.mark.parametrize("precision", ["float32", "bfloat16", "float16"])
def test_stability_score_formula(precision: str) -> None:
    u = UNIT_ROUNDOFF[precision]
    assert stability_score(0.0, bit_exact=True, precision=precision) == 100.0
    assert stability_score(0.0, bit_exact=False, precision=precision) < 100.0
    expected = 100 * (1 - math.log10(2) / math.log10(1 + 1 / u))
    assert stability_score(u, bit_exact=False, precision=precision) == pytest.approx(expected)
    assert stability_score(1.0, bit_exact=False, precision=precision) == 0.0
    assert stability_score(math.inf, bit_exact=False, precision=precision) == 0.0
    scores = [
        stability_score(d, bit_exact=False, precision=precision)
        for d in (u / 10, u, 10 * u, 100 * u)
    ]
    assert scores == sorted(scores, reverse=True)
