"""Adaptive composite quadrature for integrated gradients, driven by exact local errors.

The path [0, 1] is cut into panels whose ends are the path samples: every sample is one
model evaluation that gives both F and its gradient, and each panel [a, b] is integrated
with the trapezoid rule on its two ends. The fundamental theorem of calculus says a panel's
share of the attribution sum must be ``F(γ(b)) - F(γ(a))``, so every panel has an exact local
completeness error ``e = |(b - a) / 2 (dF/dt(a) + dF/dt(b)) - (F(b) - F(a))|``, and the errors
add up to a bound on the global completeness error. The rule is nested: bisecting a panel
costs one evaluation, at its midpoint, and keeps both ends (their gradients are kept, in the
model's precision, while they fit in the memory budget; a node whose gradient was not kept
is evaluated again when its weight changes). Each round bisects the largest-error panels
whose errors make up a quarter of the total (Dörfler marking, ties broken by position),
until the global completeness error is at most ``tolerance * |F(x) - F(b)|`` (or the errors
beyond F's rounding add up to that) or the evaluation budget is spent.

Why this rule: on the example models (ReLU networks: their integrand is piecewise constant
along the path) the former composite 2-point Gauss-Legendre panels spent five evaluations per
bisection (two new nodes per half and a panel end whose gradient was thrown away) and threw
the parent's two nodes away; its search needed up to 7 times the evaluations of the best
fixed rule chosen in hindsight (docs/benchmarks.md, integrated gradients). A smooth but steep
stretch (a normalisation layer's epsilon transition near t = 0) is refined where it is steep
and nowhere else; a kink (ReLU) is refined where it is; a true jump of F keeps its local
error however small its panel gets, which is how :mod:`attest.collection.ig.analysis` tells
the two apart. Written here because no library offers adaptive quadrature of a vector
integrand whose samples are batched model passes (scipy's ``quad_vec`` calls a Python
function per point, one model pass each, and cannot share batches between inputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from attest.collection.ig.panels import (
    MIN_PANEL_WIDTH,
    PanelLayout,
    completeness_scale,
    finite_or_none,
    mark,
    rounding_noise,
    sorted_samples,
)
from attest.collection.ig.stall import STALL_ERROR_RATIO, STALL_RATIO, ZOOM_SHARE, stop_reading

__all__ = [
    "DORFLER_SHARE",
    "MIN_PANEL_WIDTH",
    "AdaptiveOutcome",
    "PanelLayout",
    "adaptive_paths",
    "completeness_scale",
]

# Share of the total local error the panels split in one round cover. A quarter, not half:
# rounds are smaller, so the global error is read more often and the search stops sooner
# (benchmarks/bench_ig.py: 20-45 % fewer evaluations on the example models than a half).
DORFLER_SHARE = 0.25


class _Evaluator(Protocol):
    dtype: torch.dtype

    def grad(self, points: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradient (float64) and F (float64) at a batch of points of the given inputs."""

    def values(self, points: torch.Tensor, idx: torch.Tensor) -> np.ndarray:
        """F (float64) at a batch of points, forward only."""


@dataclass(eq=False)
class _Node:
    """A path sample: F and the integrand there, and its gradient while kept."""

    t: float
    f: float = float("nan")
    slope: float = float("nan")
    vector: torch.Tensor | None = None  # the gradient in the model's precision (exact)


@dataclass(eq=False)
class _Panel:
    left: _Node
    mid: _Node
    right: _Node
    parent_error: float = float("nan")
    depth: int = 0
    parent_stall: int = 0  # halvings in a row, up to its parent, that kept the error (stall)
    parent_change: float = float("nan")  # |F(b) - F(a)| of the panel it was split from

    @property
    def a(self) -> float:
        return self.left.t

    @property
    def b(self) -> float:
        return self.right.t

    def error(self) -> float:
        slopes = self.left.slope + 4.0 * self.mid.slope + self.right.slope
        return abs((self.b - self.a) / 6.0 * slopes - (self.right.f - self.left.f))

    def noise(self, eps: float) -> float:
        return rounding_noise(self.left.f, self.right.f, eps)

    def change(self) -> float:
        return abs(self.right.f - self.left.f)

    def stall(self) -> int:
        """Halvings in a row down its lineage that kept at least ``STALL_RATIO`` of the
        change of F across the panel and ``STALL_ERROR_RATIO`` of its error: a jump or a
        stretch far narrower than the panel (:mod:`attest.collection.ig.stall`)."""
        kept = (  # False for an initial panel
            self.change() >= STALL_RATIO * self.parent_change
            and self.error() >= STALL_ERROR_RATIO * self.parent_error
        )
        return self.parent_stall + 1 if kept else 0


@dataclass
class AdaptiveOutcome:
    """What :func:`adaptive_paths` returns (the caller builds :class:`IGResult` from it)."""

    acc: torch.Tensor  # (N, ...) float64 weighted gradient sums: attributions = acc * diff
    evaluations: np.ndarray
    layouts: list[PanelLayout]
    curve: list[dict[str, Any]]
    samples: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per input (t, f, slope)
    local_error: np.ndarray  # (N,) sum of local errors
    recomputed: int = 0
    stored_vectors: bool = True
    stalls: list[dict[str, Any] | None] = field(default_factory=list)  # per input, see stall


# A path sample of a round: (input, node, weight change in acc, whether it is a new node).
# An old node is evaluated again only when its gradient was not kept and its weight changes.
_Point = tuple[int, _Node, float, bool]


def adaptive_paths(
    evaluator: _Evaluator,
    b64: torch.Tensor,
    diff64: torch.Tensor,
    f_x: np.ndarray,
    f_b: np.ndarray,
    *,
    nodes: int,
    tolerance: float | None,
    max_evaluations: int,
    chunk: int,
    model_eps: float,
    vector_budget_bytes: int,
    stall_halvings: int = 0,
    stop_on_steep: bool = True,
) -> AdaptiveOutcome:
    """Adaptive nested composite trapezoid IG for every input (see the module docstring).

    ``nodes`` uniform path samples to start with (``nodes - 1`` panels, both path ends
    included); with ``tolerance`` None no panel is split (the composite trapezoid rule).
    ``max_evaluations`` bounds the path samples per input (gradient passes, repeats
    included). Node gradients are kept while they fit in ``vector_budget_bytes``; an end of a
    split panel whose gradient was not kept is evaluated again (counted in ``evaluations``).

    ``stall_halvings`` > 0: an input stops early when a panel marked for splitting kept its
    error through that many halvings in a row (:mod:`attest.collection.ig.stall`); F alone is
    then followed into that panel to say where and why. With ``stop_on_steep`` False only a
    jump stops the input; a steep smooth stretch is refined on.
    """
    state = _Adaptive(evaluator, b64, diff64, chunk, vector_budget_bytes, model_eps)
    state.stop_on_steep = stop_on_steep
    state.evaluate(state.initial_points(max(2, nodes), f_x, f_b))
    delta = completeness_scale(f_x, f_b, model_eps)
    scale = np.where(delta > 0, delta, 1.0)
    curve: list[dict[str, Any]] = []
    previous_attr: torch.Tensor | None = None
    active = np.ones(state.n, dtype=bool)
    while True:
        attr = (state.acc * diff64).reshape(state.n, -1)
        listed = np.flatnonzero(active)
        rel = state.record_round(curve, attr, previous_attr, listed, f_x - f_b, delta, scale)
        if tolerance is None:
            break
        previous_attr = attr.clone()
        points: list[_Point] = []
        for i in map(int, listed):
            if rel[i] <= tolerance and state.worst_panel(i) <= PANEL_SHARE * scale[i]:
                # Completeness is met: stop here. The local errors only bound the global one
                # (they do not cancel); refining until their sum is under the tolerance
                # spends the whole budget on piecewise-linear (ReLU) paths for nothing. A true
                # jump keeps the global error up, so it is still refined down to its panel.
                # No single panel may stay far off, though: a path whose errors cancel at a
                # coarse layout leaves samples the spike reading of ig_monotonicity cannot
                # tell from a value F does not support.
                active[i] = False
                continue
            if stall_halvings > 0 and state.stalled(
                i, tolerance * scale[i], stall_halvings, scale[i]
            ):
                active[i] = False
                continue
            refined = state.refine(
                i, tolerance * scale[i], max_evaluations, unmet=bool(rel[i] > tolerance)
            )
            if refined is None:
                active[i] = False
                continue
            points += refined
        if not points:
            break
        state.evaluate(points)
    return state.outcome(curve)


# The stop also needs every panel's error (beyond F's rounding) within this share of
# |F(x) - F(b)|: a sample is a node of at most two panels, so no sample can then carry the
# 5 % of the path's variation that ig_monotonicity's default spike share reads as a value F
# does not support (its reading of a sample is capped by its panels' errors).
PANEL_SHARE = 0.02

# Samples per input up to which a completeness miss splits panels that F's rounding allowance
# hides (:meth:`_Adaptive.refine`): tiny RoBERTa and ALBERT paths, 2 % off at 5 samples, met
# completeness within 7-21; a path that F's rounding truly limits stops here.
UNMET_SAMPLES = 64


class _Adaptive:
    """The running state of :func:`adaptive_paths`: the weighted gradient sums (``acc``), each
    input's panels, evaluations and path samples, and the bytes of node gradients kept."""

    def __init__(
        self,
        evaluator: _Evaluator,
        b64: torch.Tensor,
        diff64: torch.Tensor,
        chunk: int,
        vector_budget_bytes: int,
        model_eps: float,
    ) -> None:
        self.evaluator, self.b64, self.diff64, self.chunk = evaluator, b64, diff64, chunk
        self.n = b64.shape[0]
        self.eps = model_eps
        # Gradients arrive as the float64 image of the model-precision ones: kept in that
        # precision they lose nothing and take half (float32) or a quarter of the memory.
        self.keep_dtype = evaluator.dtype if evaluator.dtype.is_floating_point else torch.float64
        self.element_bytes = int(diff64[0].numel()) * _itemsize(self.keep_dtype)
        self.vector_budget_bytes = vector_budget_bytes
        self.kept_bytes = 0
        self.acc = torch.zeros_like(diff64)
        self.evaluations = np.zeros(self.n, dtype=np.int64)
        self.samples: list[list[tuple[float, float, float]]] = [[] for _ in range(self.n)]
        self.per_input: list[list[_Panel]] = []
        self.recomputed = 0
        self.stalls: list[dict[str, Any] | None] = [None] * self.n
        self.stop_on_steep = True

    def evaluate(self, points: list[_Point]) -> None:
        """F, slope and gradient at each point; the gradients weighted into ``acc`` in the
        points' order whatever the chunk size (same bits); new nodes filled in and their
        gradients kept while the budget allows."""
        b64, diff64, acc = self.b64, self.diff64, self.acc
        shape = (-1,) + (1,) * (b64.dim() - 1)
        for start in range(0, len(points), self.chunk):
            part = points[start : start + self.chunk]
            pos = torch.tensor([p[0] for p in part], dtype=torch.long)
            t = torch.tensor([p[1].t for p in part], dtype=torch.float64, device=b64.device)
            pos_dev = pos.to(b64.device)
            diff = diff64[pos_dev]
            grads, fs = self.evaluator.grad(torch.addcmul(b64[pos_dev], t.view(shape), diff), pos)
            slopes = (grads * diff).reshape(len(part), -1).sum(dim=1).cpu().numpy()
            fs_np = fs.cpu().numpy()
            for k, (i, node, change, fresh) in enumerate(part):
                acc[i].add_(grads[k], alpha=change)
                self.evaluations[i] += 1
                if not fresh:
                    continue
                if node.f != node.f:  # NaN: not a path end, whose F is F(b) or F(x)
                    node.f = float(fs_np[k])
                node.slope = float(slopes[k])
                if self.kept_bytes + self.element_bytes <= self.vector_budget_bytes:
                    self.kept_bytes += self.element_bytes
                    node.vector = grads[k].to(self.keep_dtype)
                self.samples[i].append((node.t, node.f, node.slope))

    def initial_points(self, nodes: int, f_x: np.ndarray, f_b: np.ndarray) -> list[_Point]:
        """The initial uniform panels of every input (``(nodes - 1) // 2`` of them, at least
        one), and the points that evaluate them."""
        panels = max(1, (nodes - 1) // 2)
        edges = np.linspace(0.0, 1.0, 2 * panels + 1)
        h = 1.0 / panels
        points: list[_Point] = []
        for i in range(self.n):
            row = [_Node(float(t)) for t in edges]
            row[0].f, row[-1].f = float(f_b[i]), float(f_x[i])
            for k, node in enumerate(row):  # Simpson weights: h/6 at panel ends, 4h/6 inside
                weight = 4.0 * h / 6.0 if k % 2 else (h / 6.0 if k in (0, 2 * panels) else h / 3.0)
                points.append((i, node, weight, True))
            self.per_input.append(
                [_Panel(row[2 * k], row[2 * k + 1], row[2 * k + 2]) for k in range(panels)]
            )
        return points

    def record_round(
        self,
        curve: list[dict[str, Any]],
        attr: torch.Tensor,
        previous_attr: torch.Tensor | None,
        listed: np.ndarray,
        gap: np.ndarray,
        delta: np.ndarray,
        scale: np.ndarray,
    ) -> np.ndarray:
        """Append this round to ``curve`` (the inputs still refined: ``listed``); return every
        input's relative completeness error (``gap``: F(x) - F(b), relative to ``delta``)."""
        n, per_input = self.n, self.per_input
        sums = attr.sum(dim=1).cpu().numpy()
        local = np.array([sum(p.error() for p in row) for row in per_input])
        with np.errstate(divide="ignore", invalid="ignore"):
            rel: np.ndarray = np.where(np.abs(sums - gap) == 0, 0.0, np.abs(sums - gap) / delta)
            change = (
                ((attr - previous_attr).norm(dim=1) / attr.norm(dim=1)).cpu().numpy()
                if previous_attr is not None
                else np.full(n, np.nan)
            )
        evaluations = self.evaluations
        curve.append(
            {
                "round": len(curve),
                "steps": int(evaluations[listed].max()) if listed.size else 0,
                "inputs": listed.tolist(),
                "evaluations": evaluations[listed].tolist(),
                "rel_error": [finite_or_none(rel[i]) for i in listed],
                "local_rel_error": [finite_or_none(local[i] / scale[i]) for i in listed],
                "panels": [len(per_input[i]) for i in listed],
                "attribution_change": [finite_or_none(change[i]) for i in listed],
            }
        )
        return rel

    def worst_panel(self, i: int) -> float:
        """Input ``i``'s largest panel error beyond F's rounding."""
        return max((p.error() - p.noise(self.eps) for p in self.per_input[i]), default=0.0)

    def _marked(self, i: int, allowed: float, rounding: bool = True) -> list[int]:
        """Input ``i``'s panels to split next (Dörfler marking of errors beyond F's rounding,
        or of the whole errors with ``rounding`` False)."""
        row = self.per_input[i]
        excess = np.array(
            [max(0.0, p.error() - (p.noise(self.eps) if rounding else 0.0)) for p in row]
        )
        widths = np.array([p.b - p.a for p in row])
        return mark(widths, np.array([p.a for p in row]), excess, allowed, DORFLER_SHARE)

    def stalled(self, i: int, allowed: float, halvings: int, scale: float) -> bool:
        """Whether input ``i`` stops here: a panel it would split next kept its error through
        ``halvings`` halvings in a row. If so F is followed into that panel
        (:func:`~attest.collection.ig.stall.stop_reading`) and ``stalls[i]`` says where."""
        row = self.per_input[i]
        stuck = [k for k in self._marked(i, allowed) if row[k].stall() >= halvings]
        if not stuck:
            return False
        panel = row[stuck[0]]
        if panel.change() < ZOOM_SHARE * scale:
            # F hardly changes across it: kinks, not a jump or steep stretch worth reporting
            # (see stall). Its lineage is refined on and not counted again.
            panel.parent_stall = -(1 << 30)
            return False
        share = panel.error() / max(sum(p.error() for p in row), 1e-300)
        ends = (panel.a, panel.b, panel.left.f, panel.right.f)
        path = (self.b64[i], self.diff64[i], i)
        reading = stop_reading(self.evaluator, path, ends, scale)
        if not reading["jump"] and not self.stop_on_steep:
            # A steep smooth stretch, to be resolved: its lineage is not zoomed into again.
            panel.parent_stall = -(1 << 30)
            return False
        self.stalls[i] = {
            **{"evaluations": int(self.evaluations[i]), "halvings": panel.stall()},
            **{"depth": panel.depth, "error": panel.error(), "parent_error": panel.parent_error},
            **{"panel_error_share": share, **reading},
        }
        return True

    def refine(
        self, i: int, allowed: float, max_evaluations: int, unmet: bool = False
    ) -> list[_Point] | None:
        """Split input ``i``'s marked panels that its remaining budget pays for; the points
        that evaluate the halves' midpoints (and any node whose gradient was not kept), or
        None when no panel is split (the input is done). ``unmet``: completeness is missed;
        when F's rounding allowance hides every panel's error, panels are then marked by their
        whole error, up to :data:`UNMET_SAMPLES` samples (the miss is measured, the allowance
        only estimated)."""
        row = self.per_input[i]
        budget = max_evaluations - int(self.evaluations[i])
        chosen: list[int] = []
        again: set[int] = set()  # nodes to evaluate again (gradient not kept), by id
        marked = self._marked(i, allowed)
        if not marked and unmet and self.evaluations[i] < UNMET_SAMPLES:
            marked = self._marked(i, allowed, rounding=False)
        for k in marked:
            panel = row[k]
            lost = {id(e) for e in (panel.left, panel.mid, panel.right) if e.vector is None}
            price = 2 + len(lost - again)
            if price > budget:
                break
            budget -= price
            again |= lost
            chosen.append(k)
        if not chosen:
            return None
        points: list[_Point] = []
        changes: dict[int, tuple[_Node, float]] = {}
        for k in sorted(chosen, reverse=True):
            parent = row[k]
            h = parent.b - parent.a
            # Simpson weights h/6, 4h/6, h/6 become h/12, 4h/12, 2h/12, 4h/12, h/12
            for node, change in (
                (parent.left, -h / 12),
                (parent.mid, -h / 2),
                (parent.right, -h / 12),
            ):
                held, before = changes.get(id(node), (node, 0.0))
                changes[id(node)] = (held, before + change)
            quarter = (_Node(parent.a + 0.25 * h), _Node(parent.a + 0.75 * h))
            points += [(i, node, h / 3.0, True) for node in quarter]
            lineage = (parent.error(), parent.depth + 1, parent.stall(), parent.change())
            row[k : k + 1] = [
                _Panel(parent.left, quarter[0], parent.mid, *lineage),
                _Panel(parent.mid, quarter[1], parent.right, *lineage),
            ]
        for node, change in changes.values():
            if node.vector is not None:
                self.acc[i].add_(node.vector.to(torch.float64), alpha=change)
            else:
                self.recomputed += 1
                points.append((i, node, change, False))
        return points

    def outcome(self, curve: list[dict[str, Any]]) -> AdaptiveOutcome:
        """The result. When every node's gradient was kept the attributions are their ordered
        weighted sum (no residue of the running sum's additions and removals)."""
        per_input, acc = self.per_input, self.acc
        stored = all(
            node.vector is not None for row in per_input for p in row for node in _nodes(p)
        )
        if stored:
            for i, row in enumerate(per_input):
                total = torch.zeros_like(self.diff64[0])
                for node, weight in _weights(row):  # in path order
                    assert node.vector is not None
                    total.add_(node.vector.to(torch.float64), alpha=weight)
                acc[i] = total
        return AdaptiveOutcome(
            acc=acc,
            evaluations=self.evaluations,
            layouts=[
                _layout(row, self.eps, stall)
                for row, stall in zip(per_input, self.stalls, strict=True)
            ],
            curve=curve,
            samples=[sorted_samples(rows) for rows in self.samples],
            local_error=np.array([sum(p.error() for p in row) for row in per_input]),
            recomputed=self.recomputed,
            stored_vectors=stored,
            stalls=self.stalls,
        )


def _nodes(panel: _Panel) -> tuple[_Node, _Node, _Node]:
    return panel.left, panel.mid, panel.right


def _weights(row: list[_Panel]) -> list[tuple[_Node, float]]:
    """Each node of an input's final panels with its composite Simpson weight, in path order."""
    out: list[tuple[_Node, float]] = [(row[0].left, 0.0)]
    for panel in row:
        h = panel.b - panel.a
        out[-1] = (out[-1][0], out[-1][1] + h / 6.0)
        out += [(panel.mid, 4.0 * h / 6.0), (panel.right, h / 6.0)]
    return out


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _layout(row: list[_Panel], eps: float, stall: dict[str, Any] | None = None) -> PanelLayout:
    located = None if stall is None or stall["f_change"] is None else stall["located"]
    return PanelLayout(
        located=None if located is None else (*located, abs(stall["f_change"])),  # type: ignore[index]
        a=np.array([p.a for p in row]),
        b=np.array([p.b for p in row]),
        error=np.array([p.error() for p in row]),
        parent_error=np.array([p.parent_error for p in row]),
        depth=np.array([p.depth for p in row], dtype=np.int64),
        f_a=np.array([p.left.f for p in row]),
        f_b=np.array([p.right.f for p in row]),
        noise=np.array([p.noise(eps) for p in row]),
    )
