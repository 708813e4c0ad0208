"""Gradients zero by construction are structural warnings, decided by evidence; an
embedding's padding row is compared with PyTorch's rule; dead parameters still fail."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import torch
from _grad_models import class_labels, continuous, cross_entropy, make_context
from torch import nn

from attest.collection.gradients import flow as gradient_flow
from attest.collection.gradients import gradcheck, second_order
from attest.evidence.model import CheckResult, Evidence
from attest.policy.engine import evaluate
from attest.policy.model import load_policy

REPO = Path(__file__).resolve().parents[4]
AT = datetime(2026, 12, 4, tzinfo=timezone.utc)


class SoftmaxShift(nn.Module):
    """A scalar bias added to every logit before log-softmax: the output ignores it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.shift = nn.Parameter(torch.tensor([0.3]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.fc(x) + self.shift, dim=-1)


class KeyBias(nn.Module):
    """Attention whose key bias adds q.b to every score of a row: softmax ignores it."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(6, 6)
        self.k = nn.Linear(6, 6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.view(x.shape[0], 2, 3).repeat(1, 1, 2)
        scores = self.q(t) @ self.k(t).transpose(1, 2)
        return self.fc((scores.softmax(-1) @ t).mean(1))


class Siamese(nn.Module):
    """A distance between two encodings by one encoder: its bias cancels."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(3, 4)
        self.head = nn.Linear(1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head((self.enc(x[:, :3]) - self.enc(x[:, 3:])).norm(dim=1, keepdim=True))


class DetachedShift(SoftmaxShift):
    """The planted defect beside it: a bias that is detached (a genuinely dead parameter)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + self.shift.detach()


class UnusedShift(SoftmaxShift):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class DeadReLU(nn.Module):
    """A hidden unit inactive on every probe example (zero at these values, not by
    construction): still a failure."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 1)
        self.fc2 = nn.Linear(1, 3)
        with torch.no_grad():
            self.fc1.weight.zero_()
            self.fc1.bias.fill_(-5.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class PaddedEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4, padding_idx=0)
        self.fc = nn.Linear(4, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(ids.long()).mean(1))


def _flow(build: type[nn.Module], loss: bool = True) -> CheckResult:
    ctx = make_context(
        build,
        continuous(4, 6),
        class_labels(4) if loss else None,
        cross_entropy if loss else None,
        capture=False,
    )
    return gradient_flow.run(ctx)


def _item(result: CheckResult, name: str):  # type: ignore[no-untyped-def]
    return next(i for i in result.items if i.subject.name == name)


def test_zero_by_construction_is_a_structural_warning_with_the_reason() -> None:
    cases = [
        (SoftmaxShift, "shift", "shift-invariant"),
        (KeyBias, "k.bias", "shift-invariant"),
        (Siamese, "enc.bias", "contributions cancel"),
    ]
    for build, name, mechanism in cases:
        for loss in (True, False):
            result = _flow(build, loss)
            item = _item(result, name)
            assert item.status == "warn", (build.__name__, item.message)
            assert item.metrics["reason_kind"] == "structural"
            assert mechanism in item.message and "random points" in item.message
            assert not result.failed_items, [i.message for i in result.failed_items]


def test_dead_parameters_still_fail() -> None:
    for build, name, kind in (
        (DetachedShift, "shift", "severed"),
        (UnusedShift, "shift", "unused"),
        (DeadReLU, "fc1.weight", "zero"),
    ):
        item = _item(_flow(build), name)
        assert item.status == "fail", (build.__name__, item.message)
        assert item.metrics["reason_kind"] == kind


def test_embedding_padding_row_follows_pytorchs_rule() -> None:
    ids = torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0], [4, 5, 6, 0], [7, 8, 9, 1]]).float()
    ctx = make_context(PaddedEmbedding, ids, class_labels(4), cross_entropy)
    checked = gradcheck.run(ctx)
    (embedding,) = [i for i in checked.items if i.subject.op == "aten.embedding.default"]
    assert embedding.status == "pass", embedding.message
    assert "padding_idx=0" in embedding.message and "no gradient by design" in embedding.message
    ctx.settings.extra["second_order_operator_probe"] = True
    result = second_order.run(ctx)
    assert not result.failed_items, [i.message for i in result.failed_items]
    model = [i for i in result.items if i.subject.kind == "model"]
    assert model and all("padding row" in i.message for i in model)
    (probed,) = [i for i in result.items if i.subject.op == "aten.embedding.default"]
    assert probed.status == "pass" and "padding_idx=0" in probed.message


def test_an_all_padding_embedding_is_structural_in_gradient_flow() -> None:
    ids = torch.zeros(4, 3)
    ctx = make_context(PaddedEmbedding, ids, class_labels(4), cross_entropy, capture=False)
    item = _item(gradient_flow.run(ctx), "emb.weight")
    assert item.status == "warn" and item.metrics["reason_kind"] == "structural"
    assert "padding_idx=0" in item.message


def test_clinical_strict_evaluates_structural_gradients_as_warnings() -> None:
    results = {b.__name__: _flow(b) for b in (SoftmaxShift, Siamese, DetachedShift)}
    strict = load_policy(REPO / "policies" / "clinical-strict.yaml")
    for name, result in results.items():
        evidence = Evidence.model_validate(
            {
                "tool_version": "0.1.0",
                "created_at": "2026-12-04T00:00:00Z",
                "model": {"name": name, "version": "1.0.0", "precision": "float32"},
                "checks": {"gradient_flow": result.model_dump(mode="json")},
            }
        )
        findings = [
            f for f in evaluate(evidence, strict, at=AT).findings if f.check == "gradient_flow"
        ]
        verdicts = {f.subject.name: f.verdict for f in findings if f.subject is not None}
        if name == "DetachedShift":  # the planted defect: still a failure
            assert verdicts["shift"] == "fail", verdicts
        else:
            structural = "shift" if name == "SoftmaxShift" else "enc.bias"
            assert verdicts[structural] == "warn", verdicts
            assert "fail" not in verdicts.values(), verdicts
