"""In-place operators (``out += identity``, ``relu_``, ``mul_``, ``add_`` with alpha, writes into
views) through every per-operator measurement: local and accumulated fidelity, the recorded
arguments, fingerprints, memory and determinism. Also: a difference that the model's output
hides is still found per operator."""

from __future__ import annotations

from pathlib import Path

import torch
from _collect_models import make_spec

from attest.collection import collect
from attest.collection.context import CollectContext
from attest.collection.profile.op_metrics import tensors_sha256
from attest.collection.profile.profiler import capture_reference
from attest.evidence.model import Evidence
from attest.spec import load_spec

MINE = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]

# A residual block written the torchvision way: the conv output is modified in place.
INPLACE = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.head = nn.Linear(3 * 6 * 6, 4)

    def forward(self, x):
        out = self.conv(x)
        out.mul_(1.5)
        out += x
        out.add_(x, alpha=0.3)
        out[:, :2] += 1.0
        out.relu_()
        return self.head(out.flatten(1))

def build():
    return Block()
"""


def _collect(path: Path) -> Evidence:
    return collect(path, runners=MINE)


def _fidelity_items(ev: Evidence) -> dict[int, dict[str, object]]:
    return {
        i.subject.operator_id: i.metrics
        for i in ev.checks["fidelity"].items
        if i.subject.operator_id is not None
    }


def test_inplace_operators_have_full_local_and_accumulated_fidelity(tmp_path: Path) -> None:
    path = make_spec(
        tmp_path, INPLACE, x=torch.randn(2, 3, 6, 6), spec_extra="repeats: 3\nthreads: 1\n"
    )
    ev = _collect(path)
    ops = {r.op for r in ev.operators}
    assert {"aten.add_.Tensor", "aten.mul_.Tensor", "aten.relu_.default"} <= ops
    items = _fidelity_items(ev)
    for row in ev.operators:
        assert row.fidelity_pct is not None and row.fidelity_pct > 99.99, row
        assert row.local_fidelity_pct is not None and row.local_fidelity_pct > 99.99, row
        metrics = items[row.id]
        for key in ("local_output_fidelity_pct", "output_fidelity_pct"):
            assert isinstance(metrics[key], float) and metrics[key] > 99.99, (row.op, key)
    # the determinism repeats align and compare in-place operators too
    assert all(r.bit_exact_rate == 1.0 for r in ev.operators)
    assert ev.checks["determinism"].summary["sequence_changed_runs"] == 0


def test_recorded_arguments_are_what_the_inplace_operator_read(tmp_path: Path) -> None:
    path = make_spec(tmp_path, INPLACE, x=torch.randn(2, 3, 6, 6), spec_extra="repeats: 2\n")
    ctx = CollectContext(spec=load_spec(path))
    profile = capture_reference(ctx)
    assert ctx.operators is not None
    adds = [
        (record, profile.ops[record.id])
        for record in ctx.operators
        if record.op == "aten.add_.Tensor" and isinstance(record.args[1], torch.Tensor)
    ]
    assert len(adds) == 2
    for record, measure in adds:
        alpha = float(record.kwargs.get("alpha", 1.0))
        expected = record.args[0] + alpha * record.args[1]
        # the output kept for the operator is its own result, not a later write's
        torch.testing.assert_close(measure.outputs[0].value, expected)
        assert not torch.equal(record.args[0], measure.outputs[0].value)
    relu = next(r for r in ctx.operators if r.op == "aten.relu_.default")
    assert float(relu.args[0].min()) < 0.0  # read before it wrote


LINEAR_RELU_INPLACE = """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu_(self.fc(x))

def build():
    return M()
"""


def test_inplace_relu_memory_and_fingerprints_are_exact(tmp_path: Path) -> None:
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(3))
    path = make_spec(tmp_path, LINEAR_RELU_INPLACE, x=x, spec_extra="repeats: 2\n")
    ev = _collect(path)
    rows = [(r.op, r.saved_activation_bytes, r.saved_parameter_bytes) for r in ev.operators]
    # addmm saves x (2*4*4 = 32, activation) and weight.t() (3*4*4 = 48, parameter); relu_
    # saves its result, the addmm output's storage (2*3*4 = 24), counted once.
    assert rows == [
        ("aten.t.default", 0, 0),
        ("aten.addmm.default", 32, 48),
        ("aten.relu_.default", 24, 0),
    ]
    # fingerprints: addmm's is of its own output, before relu_ overwrote it in place
    spec = load_spec(path)
    model = spec.build_model()
    pre = torch.addmm(model.fc.bias, x, model.fc.weight.t()).detach()
    assert bool((pre < 0).any())
    addmm, relu = ev.operators[1], ev.operators[2]
    assert addmm.output_sha256 == tensors_sha256([pre])
    assert relu.output_sha256 == tensors_sha256([torch.relu(pre)])


DOUBLE_BACKWARD_INPLACE = """
import torch
from torch import nn

class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        out = g.clone()
        out.mul_(2.0)  # an in-place call in backward
        return out

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        return self.b(Double.apply(self.a(x)))

def build():
    return M()
"""


def test_inplace_call_in_backward_is_rerun_on_what_it_read(tmp_path: Path) -> None:
    ev = _collect(make_spec(tmp_path, DOUBLE_BACKWARD_INPLACE, spec_extra="repeats: 2\n"))
    items = _fidelity_items(ev)
    mul = next(r for r in ev.operators if r.op == "aten.mul.Tensor")
    local_grad = items[mul.id]["local_grad_fidelity_pct"]
    assert isinstance(local_grad, float) and local_grad > 99.99


JITTER_INPLACE = """
import torch
from torch import nn

CALLS = [0]

class Jitter(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        x = x.clone()
        x.mul_(1.0 + 1e-6 * (CALLS[0] % 2))
        return x

def build():
    return nn.Sequential(nn.Linear(8, 8), Jitter(), nn.Linear(8, 3))
"""


def test_nondeterministic_inplace_operator_is_the_origin(tmp_path: Path) -> None:
    ev = _collect(make_spec(tmp_path, JITTER_INPLACE, spec_extra="repeats: 3\n"))
    origins = [(r.op, r.module) for r in ev.operators if r.nondeterminism_origin]
    assert origins == [("aten.mul_.Tensor", "1")]
    mul = next(r for r in ev.operators if r.op == "aten.mul_.Tensor")
    assert abs(mul.bit_exact_rate - 2 / 3) < 1e-9


# The jitter lands only in values that a ReLU then zeroes: the model's output and every
# gradient are bit-exact, but two operators are not, and per-operator rates must say so.
HIDDEN = """
import torch
from torch import nn

CALLS = [0]

class Dead(nn.Module):
    def forward(self, h):
        CALLS[0] += 1
        return torch.relu(h * (1.0 + 1e-6 * (CALLS[0] % 2)) - 100.0)

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.dead = Dead()
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        h = self.a(x)
        return self.b(h) + self.dead(h).sum(dim=1, keepdim=True)

def build():
    return M()
"""


def test_difference_hidden_from_the_output_is_still_found_per_operator(tmp_path: Path) -> None:
    ev = _collect(make_spec(tmp_path, HIDDEN, spec_extra="repeats: 3\n"))
    det = ev.checks["determinism"]
    assert det.summary["bit_exact_reproducibility"] == 1.0  # final bytes all equal...
    inexact = {(r.op, r.module) for r in ev.operators if r.bit_exact_rate != 1.0}
    assert ("aten.mul.Tensor", "dead") in inexact  # ...but the operators' are not
    assert ("aten.sub.Tensor", "dead") in inexact
    origins = [(r.op, r.module) for r in ev.operators if r.nondeterminism_origin]
    assert origins == [("aten.mul.Tensor", "dead")]
    relu = next(r for r in ev.operators if r.op == "aten.relu.default")
    assert relu.bit_exact_rate == 1.0  # all zeros either way
