"""What every check receives: the loaded spec, the settings, and the profiler's operator capture.

This is the contract between the collect orchestrator (``attest.collection.collect``) and the
check modules. Each check module exposes ``run(ctx: CollectContext) -> list[CheckResult]``
and is listed in ``attest.collection.CHECK_RUNNERS``; the orchestrator calls them in order and
turns any exception into an ``error`` result, so a failing check never stops the others.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from attest.collection.capture.records import OpRecord, target_scalar
from attest.collection.capture.spill import Pager
from attest.collection.gradients.shared_model import SharedModel
from attest.collection.gradients.state import GradientState
from attest.collection.ig.state import IGState
from attest.collection.model_template import ModelTemplate
from attest.collection.profile.state import ProfileState
from attest.core.progress import ProgressFn
from attest.evidence.model import ExportRecord
from attest.spec import LoadedSpec, TargetSpec

T = TypeVar("T")


@contextmanager
def spec_threads(count: int | None) -> Iterator[None]:
    """The spec's intra-op thread count for the duration (restored after); None keeps the
    current one."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(max(1, int(count)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects alive now (torch, the model's library, the loaded spec: some 300,000 on a
    MONAI model) left out of the cyclic garbage collector's passes for the duration, and given
    back to it after (``gc.freeze`` / ``gc.unfreeze``). The collect calls ``gc.collect()``
    between phases so that a phase's dropped graphs and model copies go before the next one
    starts; each such pass, and each automatic full pass, walked every one of those objects:
    0.18 s per pass, about 3 s of a ViT's 75 s collect. The objects made during the
    collect are collected as before."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


__all__ = [
    "CheckSettings",
    "CollectContext",
    "LoadedSpec",
    "OpRecord",
    "TargetSpec",
    "cast_model",
    "frozen_heap",
    "precision_dtype",
    "spec_threads",
    "target_scalar",
]

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}


def precision_dtype(precision: str) -> torch.dtype:
    """The torch dtype of a precision name."""
    return _DTYPES[precision]


_COMPLEX: dict[torch.dtype, torch.dtype] = {
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}


def cast_model(model: nn.Module, device: str | torch.device, dtype: torch.dtype) -> nn.Module:
    """``model.to(device, dtype)`` that keeps complex tensors complex: floating parameters and
    buffers become ``dtype``, complex ones the complex dtype of that precision (complex64 for
    float32, complex128 for float64; left as they are for float16/bfloat16, which have no
    usable complex counterpart on every device)."""
    complex_dtype = _COMPLEX.get(dtype)

    def convert(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point():
            return t.to(device=device, dtype=dtype)
        if t.is_complex() and complex_dtype is not None:
            return t.to(device=device, dtype=complex_dtype)
        return t.to(device=device)

    model._apply(convert)  # type: ignore[no-untyped-call]  # what Module.to runs, with our convert
    return model


def run_in_float64(model: nn.Module) -> None:
    """Run ``model``'s forward with float64 as torch's default dtype, restored after it (also
    when it raises): a float64 run of the model computes every value in float64, including
    the tensors its forward makes without a dtype. Without it, a model that builds its RNN's
    initial state with ``torch.zeros(...)`` met float64 weights with a float32 state and could
    not run in float64 at all (a clean model refused)."""
    saved: list[torch.dtype] = []

    def before(_module: nn.Module, _args: Any) -> None:
        saved.append(torch.get_default_dtype())
        torch.set_default_dtype(torch.float64)

    def after(_module: nn.Module, _args: Any, _output: Any) -> None:
        if saved:
            torch.set_default_dtype(saved.pop())

    model.register_forward_pre_hook(before)
    model.register_forward_hook(after, always_call=True)


@dataclass
class CheckSettings:
    """Knobs of the checks. Defaults are the documented defaults; a policy may raise them."""

    seed: int = 0
    gradcheck_directions: int = 4
    gradcheck_full_jacobian_max_numel: int = 64
    ig_method: str = "adaptive"  # local-error-driven panels (docs/ig.md); or a fixed rule
    ig_steps: int = 5  # the adaptive search's first path samples: two Simpson panels (docs/ig.md)
    ig_max_steps: int = 1024
    ig_tolerance: float = 1e-3
    ig_memory_budget_bytes: int = 256 * 1024 * 1024
    # ig_determinism: the same batch of path points, ig_determinism_points per input, is
    # evaluated ig_repeats times and compared bit for bit (not the whole search again)
    ig_repeats: int = 2
    ig_determinism_points: int = 2
    # adaptive search: stop an input once a panel kept its error through this many halvings
    # in a row (a jump or a far narrower stretch; 0: never stop early); docs/ig.md
    ig_stall_halvings: int = 3
    # ...and a steep smooth stretch stops it too (False: only a jump does; the stretch is
    # refined on, up to ig_max_steps, as policies that pay for full refinement want)
    ig_stop_on_steep: bool = True
    ig_max_inputs: int | None = None  # IG on the first k probe inputs (None: all)
    ig_near_miss_factor: float = 10.0  # warn, not fail: error <= this * tolerance at the cap...
    ig_near_miss_min_reduction: float = 4.0  # ...and it fell by this factor as steps doubled
    ig_baseline_max_target_probability: float = 0.5  # fail: baseline reads as the target
    ig_baseline_min_entropy_ratio: float = 0.5  # warn: softmax at the baseline far from uniform
    ig_baseline_max_output_ratio: float = 0.5  # non-classifiers: fail when |F(b)| > this * |F(x)|
    ig_monotonicity_max_jump: float = 0.05  # fail: F jumps by this share of the path variation
    ig_monotonicity_max_spike_share: float = 0.05  # fail: one node's spike carries this share
    ig_monotonicity_flip_tolerance: float = 0.1  # warn: sign flips between slopes above this share
    ig_randomization_max_spearman: float = 0.5  # fail: |rank correlation| after full randomization
    ig_randomization_max_layers: int = 3  # cascade checkpoints at which IG is recomputed
    ig_randomization_inputs: int = 2  # probe inputs used by the randomization test
    ig_randomization_steps: int = 2  # Gauss-Legendre nodes of its (coarse, fixed) rule
    ig_attribution_max_bytes: int = 1 << 20  # stored attributions for the report
    accumulation_microbatches: tuple[int, ...] = (2, 4)
    # 3, not 2, since the products run on a sub-batch: the third direction keeps the
    # detection rate of defects at the edge of detectability (docs/gradient-checks.md)
    second_order_directions: int = 3
    # Hessian-vector products on the first k probe examples (None: the whole batch): in eval
    # mode examples are independent, so any one runs every operator's double backward, at 1/N
    # of the float64 double backward's time and memory (docs/gradient-checks.md)
    second_order_batch: int | None = 1
    # ...and, for images and volumes, on the central half of each side when the model runs the
    # same operators there (attest.collection.gradients.sub_probe)
    second_order_crop: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CollectContext:
    """Everything a check needs. ``operators`` is filled by the profiler before other checks run."""

    spec: LoadedSpec
    settings: CheckSettings = field(default_factory=CheckSettings)
    operators: list[OpRecord] | None = None
    topology_ok: bool = True
    topology_reason: str | None = None
    # Where the export check writes model.onnx and the probe bundle (None: settings.extra's
    # "output_dir", else a new temporary folder), and what it wrote (None until it exported).
    output_dir: Path | None = None
    export: ExportRecord | None = None
    # The progress callback of ``collect`` (None: nothing is shown; see attest.core.progress).
    progress: ProgressFn | None = None
    # What the check families hand on, one typed record per sub-package: the reference run's
    # profile (filled before any check runs), the gradient checks' hand-offs to each other,
    # and the IG attributions the collector copies into the evidence.
    profiler: ProfileState = field(default_factory=ProfileState)
    gradients: GradientState = field(default_factory=GradientState)
    ig: IGState = field(default_factory=IGState)
    extras: dict[str, Any] = field(
        default_factory=dict
    )  # room for checks to share results not typed above
    _shared: dict[torch.dtype, SharedModel] = field(default_factory=dict, repr=False)
    _template: ModelTemplate | None = field(default=None, repr=False)

    def shared_model(self, dtype: torch.dtype | None = None) -> nn.Module:
        """An instance as :meth:`fresh_model` builds it, shared between the gradient checks:
        handed out again while it is as built, restored or rebuilt when a check changed it
        (see :mod:`attest.collection.gradients.shared_model`). A check that changes the model on purpose
        (training mode, perturbed weights) takes a fresh one instead."""
        dtype = dtype or precision_dtype(self.spec.precision)
        shared = self._shared.get(dtype)
        if shared is None:
            shared = self._shared[dtype] = SharedModel(lambda: self.fresh_model(dtype))
        return shared.get()

    def release_spill_pages(self) -> None:
        """Give back the pages of run 0's spill file that this process has read: they stay in
        the page cache and fault back in when read again (see
        :meth:`attest.collection.capture.spill.SpillFile.release`). Checks that read many
        captured operators call it as they go, so that their resident set holds the operators
        at hand, not every one read so far."""
        profile = self.profiler.profile
        for spill in profile.spills if profile is not None else []:
            spill.release()

    def paged(self, records: Iterable[T]) -> Iterator[T]:
        """``records`` (captured operators), giving back the spill file's pages every
        :data:`~attest.collection.capture.spill.PAGED_EVERY` of them: a check that reads each
        operator once then holds a few operators' arguments, not all of run 0's."""
        pager = Pager(self.release_spill_pages)
        for record in records:
            yield record
            pager.tick()

    def release_shared_models(self) -> None:
        """Drop the shared instances and their snapshots (when the gradient checks are done)."""
        for shared in self._shared.values():
            shared.release()
        self._shared.clear()

    def fresh_model(self, dtype: torch.dtype | None = None) -> nn.Module:
        """A new instance with the trained weights, in eval mode, on the spec's device and dtype
        (default: the deployed precision).

        A float64 instance is also *built* and *run* with float64 as the default dtype, so
        tensors the model makes at construction and keeps as plain attributes (a sampling grid,
        a constant), which ``Module.to`` does not see, and tensors its forward makes without a
        dtype (an RNN's ``h0 = torch.zeros(layers, n, hidden)``, as the tutorials write it),
        are float64 too (:func:`run_in_float64`). Complex parameters and
        buffers take the complex dtype of the same precision (``Module.to(float64)`` would
        drop their imaginary parts). Other instances are deep copies of one build when the
        factory's builds are reproducible (:mod:`attest.collection.model_template`).
        """
        dtype = dtype or precision_dtype(self.spec.precision)
        if dtype == torch.float64:
            previous = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                model = self.spec.build_model()
            finally:
                torch.set_default_dtype(previous)
        else:
            if self._template is None:
                self._template = ModelTemplate(self.spec.build_model, self.settings.seed)
            model = self._template.new()
        model = cast_model(model, self.spec.device, dtype)
        if dtype == torch.float64:
            run_in_float64(model)
        model.eval()
        return model

    def inputs(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The probe inputs on the spec's device in ``dtype`` (default: the deployed precision)."""
        return self.spec.inputs.to(
            device=self.spec.device, dtype=dtype or precision_dtype(self.spec.precision)
        )
