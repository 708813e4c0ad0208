"""Adaptive composite quadrature for integrated gradients, driven by exact local errors.

The path [0, 1] is cut into panels, each integrated with an m-point Gauss-Legendre rule. For a
panel [a, b] the fundamental theorem of calculus says its share of the attribution sum must be
``F(γ(b)) - F(γ(a))``; F at the panel ends comes from the same batched passes (an end point is
one more path sample, weight 0), so every panel has an exact local completeness error
``e = |sum_j w_j (b - a) dF/dt(t_j) - (F(b) - F(a))|``, and the errors add up to a bound on
the global completeness error. Panels are bisected, most erroneous first (Dörfler marking:
the fewest panels whose errors make up half of the total, so each round's model batch stays
large, ties broken by position), until the global completeness error is at most
``tolerance * |F(x) - F(b)|`` (or the errors beyond F's rounding add up to that) or the
evaluation budget is spent. A smooth but steep stretch
(a normalisation layer's epsilon transition near t = 0) is refined where it is steep and
nowhere else; a kink (ReLU) is refined where it is; a true jump of F keeps its local error
however small its panel gets, which is how :mod:`attest.collection.ig.analysis` tells the two
apart. Written here because no library offers adaptive quadrature of a vector integrand
whose samples are batched model passes (scipy's ``quad_vec`` calls a Python function per
point, one model pass each, and cannot share batches between inputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from attest.collection.ig.quadrature import gauss_legendre
from attest.collection.ig.stall import MIN_PANEL_WIDTH, STALL_RATIO, stop_reading

__all__ = [
    "DEFAULT_PANEL_NODES",
    "MIN_PANEL_WIDTH",
    "PanelLayout",
    "adaptive_paths",
    "completeness_scale",
]

DEFAULT_PANEL_NODES = 2
_DORFLER_SHARE = 0.5
# Rounding allowance of F per panel end, in units of the model dtype's epsilon times |F|.
_ROUNDING_ULPS = 8.0


class _Evaluator(Protocol):
    dtype: torch.dtype

    def grad(self, points: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradient (float64) and F (float64) at a batch of points of the given inputs."""

    def values(self, points: torch.Tensor, idx: torch.Tensor) -> np.ndarray:
        """F (float64) at a batch of points, forward only."""


@dataclass
class PanelLayout:
    """One input's final panels (sorted by ``a``) and how their errors evolved.

    ``error`` is each panel's local error ``|integral estimate - (F(b) - F(a))|``;
    ``parent_error`` the error of the panel it was split from (NaN for an initial panel);
    ``depth`` how many halvings made it; ``f_a``/``f_b`` F at its ends; ``noise`` the
    rounding allowance of F at its ends.
    """

    a: np.ndarray
    b: np.ndarray
    error: np.ndarray
    parent_error: np.ndarray
    depth: np.ndarray
    f_a: np.ndarray
    f_b: np.ndarray
    noise: np.ndarray
    min_width: float = MIN_PANEL_WIDTH
    # Where the search stopped early (see ``stall``): the narrowest interval the F-only zoom
    # reached inside the stalled panel, and how much F changes across it.
    located: tuple[float, float, float] | None = None

    def summary(self) -> dict[str, Any]:
        """Panel count, narrowest and widest panel, deepest refinement, the largest error."""
        width = self.b - self.a
        k = int(np.argmax(self.error)) if self.error.size else 0
        return {
            "panels": int(self.a.size),
            "min_width": float(width.min()) if width.size else None,
            "max_width": float(width.max()) if width.size else None,
            "max_depth": int(self.depth.max()) if self.depth.size else 0,
            "max_local_error": float(self.error[k]) if self.error.size else None,
            "max_local_error_panel": [float(self.a[k]), float(self.b[k])]
            if self.error.size
            else None,
        }


@dataclass
class _Panel:
    a: float
    b: float
    f_a: float
    f_b: float
    value: float = 0.0  # integral estimate of dF/dt over the panel
    parent_error: float = float("nan")
    depth: int = 0
    parent_stall: int = 0  # halvings in a row, up to its parent, that kept the error (stall)
    vector: torch.Tensor | None = None  # its attribution-gradient sum, when kept

    def error(self) -> float:
        return abs(self.value - (self.f_b - self.f_a))

    def stall(self) -> int:
        """Halvings in a row down its lineage that kept at least ``STALL_RATIO`` of the error:
        a jump or a stretch far narrower than the panel (:mod:`attest.collection.ig.stall`)."""
        kept = self.error() >= STALL_RATIO * self.parent_error  # False for an initial panel
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


def _noise(f_a: float, f_b: float, eps: float) -> float:
    return _ROUNDING_ULPS * eps * (abs(f_a) + abs(f_b))


def completeness_scale(f_x: np.ndarray, f_b: np.ndarray, eps: float) -> np.ndarray:
    """What a completeness error is relative to: ``|F(x) - F(b)|``, or F's own rounding in the
    model's precision when that is larger. F(x) and F(b) are computed in the deployed
    precision, so a difference smaller than their rounding (a float16 model whose output
    barely moves along the path) cannot be checked to a finer relative error than that."""
    floor: np.ndarray = _ROUNDING_ULPS * eps * (np.abs(f_x) + np.abs(f_b))
    scale: np.ndarray = np.maximum(np.abs(f_x - f_b), floor)
    return scale


# A path sample of a round: (input, t, weight into acc, sink panel or None, role). The role
# says what the sample's F or slope fills in: ("node", panel, weight) a panel's integral,
# ("end", left, right) the F shared by two neighbouring panels, ("undo",) nothing.
_Point = tuple[int, float, float, _Panel | None, Any]


def adaptive_paths(
    evaluator: _Evaluator,
    b64: torch.Tensor,
    diff64: torch.Tensor,
    f_x: np.ndarray,
    f_b: np.ndarray,
    *,
    panels: int,
    panel_nodes: int,
    tolerance: float | None,
    max_evaluations: int,
    chunk: int,
    model_eps: float,
    vector_budget_bytes: int,
    stall_halvings: int = 0,
    stop_on_steep: bool = True,
) -> AdaptiveOutcome:
    """Adaptive composite Gauss-Legendre IG for every input (see the module docstring).

    ``panels`` uniform panels to start with; with ``tolerance`` None no panel is split (a
    fixed composite rule). ``max_evaluations`` bounds the path samples per input (gradient
    passes, panel ends included). Panel gradient sums are kept while they fit in
    ``vector_budget_bytes``; a split panel whose sum was not kept is evaluated again to take
    it out of the running sum (counted in ``evaluations``).

    ``stall_halvings`` > 0: an input stops early when a panel marked for splitting kept its
    error through that many halvings in a row (:mod:`attest.collection.ig.stall`); F alone is
    then followed into that panel to say where and why. With ``stop_on_steep`` False only a
    jump stops the input; a steep smooth stretch is refined on.
    """
    state = _Adaptive(evaluator, b64, diff64, panel_nodes, chunk, vector_budget_bytes)
    state.stop_on_steep = stop_on_steep
    points = state.initial_points(panels, f_x, f_b)
    _assign(points, state.evaluate(points))
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
        points = []
        for i in map(int, listed):
            if rel[i] <= tolerance:
                # Completeness is met: stop here. The local errors only bound the global one
                # (they do not cancel); refining until their sum is under the tolerance
                # spends the whole budget on piecewise-linear (ReLU) paths for nothing. A true
                # jump keeps the global error up, so it is still refined down to its panel.
                active[i] = False
                continue
            if stall_halvings > 0 and state.stalled(
                i, tolerance * scale[i], stall_halvings, scale[i], model_eps
            ):
                active[i] = False
                continue
            refined = state.refine(i, tolerance * scale[i], max_evaluations, model_eps)
            if refined is None:
                active[i] = False
                continue
            points += refined
        if not points:
            break
        _assign(points, state.evaluate(points))
    return state.outcome(curve, model_eps)


class _Adaptive:
    """The running state of :func:`adaptive_paths`: the weighted gradient sums (``acc``), each
    input's panels, evaluations and path samples, and the bytes of panel sums kept."""

    def __init__(
        self,
        evaluator: _Evaluator,
        b64: torch.Tensor,
        diff64: torch.Tensor,
        panel_nodes: int,
        chunk: int,
        vector_budget_bytes: int,
    ) -> None:
        self.evaluator, self.b64, self.diff64, self.chunk = evaluator, b64, diff64, chunk
        self.n = b64.shape[0]
        self.panel_nodes = panel_nodes
        self.nodes, self.weights = gauss_legendre(panel_nodes)
        self.element_bytes = int(diff64[0].numel()) * 8
        self.vector_budget_bytes = vector_budget_bytes
        self.kept_bytes = 0
        self.acc = torch.zeros_like(diff64)
        self.evaluations = np.zeros(self.n, dtype=np.int64)
        self.samples: list[list[tuple[float, float, float]]] = [[] for _ in range(self.n)]
        self.per_input: list[list[_Panel]] = []
        self.recomputed = 0
        self.stalls: list[dict[str, Any] | None] = [None] * self.n
        self.stop_on_steep = True

    def new_vector(self) -> torch.Tensor | None:
        """A zero panel sum, or None when keeping it would exceed the budget."""
        if self.kept_bytes + self.element_bytes > self.vector_budget_bytes:
            return None
        self.kept_bytes += self.element_bytes
        return torch.zeros_like(self.diff64[0])

    def evaluate(self, points: list[_Point]) -> list[tuple[float, float]]:
        """F and slope at each point; gradients weighted into ``acc`` and panel vectors.
        Gradients are added in the points' order whatever the chunk size (same bits)."""
        b64, diff64, acc = self.b64, self.diff64, self.acc
        out: list[tuple[float, float]] = []
        shape = (-1,) + (1,) * (b64.dim() - 1)
        for start in range(0, len(points), self.chunk):
            part = points[start : start + self.chunk]
            pos = torch.tensor([p[0] for p in part], dtype=torch.long)
            t = torch.tensor([p[1] for p in part], dtype=torch.float64, device=b64.device)
            pos_dev = pos.to(b64.device)
            diff = diff64[pos_dev]
            grads, fs = self.evaluator.grad(torch.addcmul(b64[pos_dev], t.view(shape), diff), pos)
            slopes = (grads * diff).reshape(len(part), -1).sum(dim=1).cpu().numpy()
            fs_np = fs.cpu().numpy()
            for k, (i, tk, weight, sink, _role) in enumerate(part):
                if weight != 0.0:
                    acc[i].add_(grads[k], alpha=weight)
                    if sink is not None and sink.vector is not None:
                        sink.vector.add_(grads[k], alpha=weight)
                self.evaluations[i] += 1
                self.samples[i].append((tk, float(fs_np[k]), float(slopes[k])))
                out.append((float(fs_np[k]), float(slopes[k])))
        return out

    def panel_points(self, i: int, panel: _Panel) -> list[_Point]:
        """The Gauss-Legendre nodes of ``panel`` for input ``i``."""
        h = panel.b - panel.a
        return [
            (i, panel.a + h * float(x), h * float(w), panel, ("node", panel, float(w) * h))
            for x, w in zip(self.nodes, self.weights, strict=True)
        ]

    def initial_points(self, panels: int, f_x: np.ndarray, f_b: np.ndarray) -> list[_Point]:
        """The initial uniform panels of every input, and the points that evaluate them."""
        edges = np.linspace(0.0, 1.0, panels + 1)
        points: list[_Point] = []
        for i in range(self.n):
            row = [
                _Panel(float(edges[k]), float(edges[k + 1]), float("nan"), float("nan"))
                for k in range(panels)
            ]
            row[0].f_a, row[-1].f_b = float(f_b[i]), float(f_x[i])
            for panel in row:
                panel.vector = self.new_vector()
                points += self.panel_points(i, panel)
            for k in range(1, panels):
                points.append((i, float(edges[k]), 0.0, None, ("end", row[k - 1], row[k])))
            self.per_input.append(row)
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
                "rel_error": [_finite(rel[i]) for i in listed],
                "local_rel_error": [_finite(local[i] / scale[i]) for i in listed],
                "panels": [len(per_input[i]) for i in listed],
                "attribution_change": [_finite(change[i]) for i in listed],
            }
        )
        return rel

    def stalled(self, i: int, allowed: float, halvings: int, scale: float, eps: float) -> bool:
        """Whether input ``i`` stops here: a panel it would split next kept its error through
        ``halvings`` halvings in a row. If so F is followed into that panel
        (:func:`~attest.collection.ig.stall.stop_reading`) and ``stalls[i]`` says where."""
        row = self.per_input[i]
        excess = np.array([max(0.0, p.error() - _noise(p.f_a, p.f_b, eps)) for p in row])
        stuck = [k for k in _mark(row, excess, allowed) if row[k].stall() >= halvings]
        if not stuck:
            return False
        panel = row[stuck[0]]
        share = panel.error() / max(sum(p.error() for p in row), 1e-300)
        ends = (panel.a, panel.b, panel.f_a, panel.f_b)
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
        self, i: int, allowed: float, max_evaluations: int, model_eps: float
    ) -> list[_Point] | None:
        """Split input ``i``'s marked panels that its remaining budget pays for; the points
        that evaluate the halves, or None when no panel is split (the input is done)."""
        row = self.per_input[i]
        excess = np.array([max(0.0, p.error() - _noise(p.f_a, p.f_b, model_eps)) for p in row])
        budget = max_evaluations - int(self.evaluations[i])
        cost = 2 * self.panel_nodes + 1
        chosen = []
        for k in _mark(row, excess, allowed):
            price = cost + (self.panel_nodes if row[k].vector is None else 0)
            if price > budget:
                break
            budget -= price
            chosen.append(k)
        if not chosen:
            return None
        points: list[_Point] = []
        for k in sorted(chosen, reverse=True):
            points += self._split(i, row, k)
        return points

    def _split(self, i: int, row: list[_Panel], k: int) -> list[_Point]:
        """Bisect panel ``k`` of ``row``: its sum leaves ``acc`` (kept, or evaluated again with
        negative weights), and the points of its halves and their shared end are returned."""
        parent = row[k]
        error = parent.error()
        mid = 0.5 * (parent.a + parent.b)
        stall = parent.stall()
        left = _Panel(parent.a, mid, parent.f_a, float("nan"), 0.0, error, parent.depth + 1, stall)
        right = _Panel(mid, parent.b, float("nan"), parent.f_b, 0.0, error, parent.depth + 1, stall)
        points: list[_Point] = []
        if parent.vector is not None:
            self.acc[i].sub_(parent.vector)
            self.kept_bytes -= self.element_bytes
            parent.vector = None
        else:  # its sum was not kept: evaluate it again, with negative weights
            self.recomputed += 1
            points += [
                (j, tk, -w, None, ("undo",)) for j, tk, w, _, _ in self.panel_points(i, parent)
            ]
        left.vector, right.vector = self.new_vector(), self.new_vector()
        points += self.panel_points(i, left) + self.panel_points(i, right)
        points.append((i, mid, 0.0, None, ("end", left, right)))
        row[k : k + 1] = [left, right]
        return points

    def outcome(self, curve: list[dict[str, Any]], model_eps: float) -> AdaptiveOutcome:
        """The result. The attributions are the ordered sum of the final panels' kept sums
        (no cancellation residue from the running sum) when every one was kept."""
        per_input, acc = self.per_input, self.acc
        stored = all(p.vector is not None for row in per_input for p in row)
        if stored:
            for i, row in enumerate(per_input):
                total = torch.zeros_like(self.diff64[0])
                for panel in row:
                    assert panel.vector is not None
                    total.add_(panel.vector)
                acc[i] = total
        return AdaptiveOutcome(
            acc=acc,
            evaluations=self.evaluations,
            layouts=[
                _layout(row, model_eps, stall)
                for row, stall in zip(per_input, self.stalls, strict=True)
            ],
            curve=curve,
            samples=[_sorted_samples(rows) for rows in self.samples],
            local_error=np.array([sum(p.error() for p in row) for row in per_input]),
            recomputed=self.recomputed,
            stored_vectors=stored,
            stalls=self.stalls,
        )


def _sorted_samples(
    rows: list[tuple[float, float, float]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One input's path samples as (t, f, slope) arrays sorted by t, the first of equal t kept."""
    table = np.array(rows, dtype=np.float64).reshape(-1, 3)
    order = np.argsort(table[:, 0], kind="stable")
    t_sorted, first = np.unique(table[order, 0], return_index=True)
    return t_sorted, table[order, 1][first], table[order, 2][first]


def _assign(points: list[_Point], values: list[tuple[float, float]]) -> None:
    """Panel integrals from node slopes, panel ends from end-point F, in point order."""
    for (_, _, _, _, role), (f, slope) in zip(points, values, strict=True):
        if role[0] == "node":
            role[1].value += role[2] * slope
        elif role[0] == "end":
            role[1].f_b = f
            role[2].f_a = f


def _mark(row: list[_Panel], excess: np.ndarray, allowed: float) -> list[int]:
    """Dörfler marking: the largest-error panels whose excess errors make up half the total,
    when the total is over ``allowed``; panels at the minimum width are never marked."""
    total = float(excess.sum())
    if not total > allowed:
        return []
    splittable = [k for k in range(len(row)) if row[k].b - row[k].a > 2 * MIN_PANEL_WIDTH]
    order = sorted((k for k in splittable if excess[k] > 0), key=lambda k: (-excess[k], row[k].a))
    chosen, covered = [], 0.0
    for k in order:
        chosen.append(k)
        covered += float(excess[k])
        if covered >= _DORFLER_SHARE * total:
            break
    return chosen


def _layout(row: list[_Panel], eps: float, stall: dict[str, Any] | None = None) -> PanelLayout:
    located = None if stall is None or stall["f_change"] is None else stall["located"]
    return PanelLayout(
        located=None if located is None else (*located, abs(stall["f_change"])),  # type: ignore[index]
        a=np.array([p.a for p in row]),
        b=np.array([p.b for p in row]),
        error=np.array([p.error() for p in row]),
        parent_error=np.array([p.parent_error for p in row]),
        depth=np.array([p.depth for p in row], dtype=np.int64),
        f_a=np.array([p.f_a for p in row]),
        f_b=np.array([p.f_b for p in row]),
        noise=np.array([_noise(p.f_a, p.f_b, eps) for p in row]),
    )


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
