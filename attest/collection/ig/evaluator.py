"""How integrated gradients pushes path points through the model (for :mod:`attest.collection.ig.attribution`).

Eval mode with every module's flag restored; the target F per example; gradients in float64;
the bytes one path sample needs (one probe step) and the chunk size that follows; the memory
layout the points are fed in (channels-last for convolutional models on CPU).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor

__all__ = [
    "CPU_PROBE_SAMPLES",
    "CPU_WORKING_SET_BYTES",
    "SAMPLE_BYTES",
    "PathEvaluator",
    "argmax_classes",
    "eval_mode",
    "path_evaluator",
    "path_gradients",
    "preferred_memory_format",
    "probe",
    "samples_per_chunk",
    "select_target",
    "share_sample_bytes",
]

_MEMORY_SAFETY_FACTOR = 1.5
# On CPU, chunks whose estimated working set is about this size ran fastest (benchmarks/bench_ig.py);
# one batch of every step, Captum's default, was up to 2x slower.
CPU_WORKING_SET_BYTES = 64 * 1024 * 1024
# ... except that a chunk may hold up to this many samples of the probe batch (see
# ``samples_per_chunk``).
CPU_PROBE_SAMPLES = 2
# Bytes per path sample measured by the probe step, per model and input shape: activation
# memory does not depend on the weights' values, so a repeat run need not probe again.
# The layout chosen for them (see ``preferred_memory_format``) is kept with them.
SAMPLE_BYTES: weakref.WeakKeyDictionary[
    nn.Module, dict[tuple[Any, ...], tuple[int, torch.memory_format]]
] = weakref.WeakKeyDictionary()


def select_target(output: torch.Tensor, classes: torch.Tensor | None) -> torch.Tensor:
    """F per example: ``output[:, k]`` summed over further dims (as ``context.target_scalar``)."""
    n = output.shape[0]
    if output.dim() < 2 or classes is None:
        return output.reshape(n, -1).sum(dim=1)
    if output.dim() == 2:  # a classifier: one logit each (what the sum below gives, exactly)
        return output.gather(1, classes.to(device=output.device, dtype=torch.long).view(n, 1))[:, 0]
    flat = output.reshape(n, output.shape[1], -1)
    index = (
        classes.to(device=output.device, dtype=torch.long).view(n, 1, 1).expand(n, 1, flat.shape[2])
    )
    return flat.gather(1, index).reshape(n, -1).sum(dim=1)


def argmax_classes(output: torch.Tensor) -> torch.Tensor:
    """Each example's predicted class (its class channel summed over further dims), on CPU."""
    n = output.shape[0]
    if output.dim() < 2:
        return torch.zeros(n, dtype=torch.long)
    return output.detach().reshape(n, output.shape[1], -1).sum(dim=2).argmax(dim=1).cpu()


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[dict[str, Any]]:
    """Eval mode for the duration; every module's own training flag is restored after."""
    modules = list(model.named_modules())
    flags = [(module, module.training) for _, module in modules]
    was_training = any(training for _, training in flags)
    if was_training:  # (a model already in eval mode is left untouched)
        model.eval()
    info: dict[str, Any] = {
        "was_training": was_training,
        "has_batchnorm": any(isinstance(m, nn.modules.batchnorm._BatchNorm) for _, m in modules),
        "has_dropout": any(isinstance(m, nn.modules.dropout._DropoutNd) for _, m in modules),
        # modules whose train()/eval() override leaves them training (their outputs may vary)
        "still_training_after_eval": [name for name, m in modules if m.training],
    }
    try:
        yield info
    finally:
        for module, training in flags:
            if module.training != training:
                module.training = training


class PathEvaluator:
    """Pushes path points through the model; returns gradients and F in float64."""

    def __init__(
        self,
        model: nn.Module,
        dtype: torch.dtype,
        classes: torch.Tensor | None,
        target_fn: Callable[[torch.Tensor], torch.Tensor] | None,
        memory_format: torch.memory_format = torch.contiguous_format,
    ) -> None:
        self.model = model
        self.dtype = dtype
        self.memory_format = memory_format  # layout of the points the model is fed
        self.classes = classes
        self.target_fn = target_fn

    def target(self, output: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """F (k,) of the model output (k, ...) of samples of the inputs ``idx``."""
        if self.target_fn is not None:
            return self.target_fn(output)
        return select_target(output, None if self.classes is None else self.classes[idx])

    def endpoints(
        self, x64: torch.Tensor, b64: torch.Tensor, chunk: int, *, find_classes: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """F(x) and F(b) (float64), inputs and baselines in one forward per chunk; with
        ``find_classes``, each input's class is its argmax at x."""
        n = x64.shape[0]
        f_x, f_b = np.empty(n), np.empty(n)
        with torch.no_grad():
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                out = self.output(torch.cat([x64[s:e], b64[s:e]]))
                if find_classes:
                    assert self.classes is not None
                    self.classes[s:e] = argmax_classes(out[: e - s])
                idx = torch.arange(s, e)
                f_x[s:e] = self.target(out[: e - s], idx).to(torch.float64).cpu().numpy()
                f_b[s:e] = self.target(out[e - s :], idx).to(torch.float64).cpu().numpy()
        return f_x, f_b

    def model_input(self, points: torch.Tensor) -> torch.Tensor:
        """``points`` as a fresh tensor in the model's precision and :attr:`memory_format`."""
        return points.to(self.dtype, memory_format=self.memory_format, copy=True)

    def output(self, points: torch.Tensor) -> torch.Tensor:
        """The model's output tensor at ``points`` (the first tensor of a tuple, ``"out"``/
        ``"logits"`` of a mapping: :func:`~attest.collection.capture.run.model_output_tensor`)."""
        return model_output_tensor(self.model(self.model_input(points)))

    def grad(
        self,
        points: torch.Tensor,
        idx: torch.Tensor,
        endpoints: tuple[torch.Tensor, torch.Tensor] | None = None,
        *,
        find_classes: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradient of F (float64, shape of ``points``) and F (k,) float64 at ``points``.

        ``idx`` are the input indices of the samples (for their target classes). F is summed
        over the batch before backward: each sample's F depends on that sample only (eval
        mode), and d(sum)/dF_i = 1 exactly, so these are the per-sample gradients, bit for bit.

        ``endpoints`` (inputs, baselines) of inputs ``0..n-1``: they ride along in the same
        forward pass (one pass instead of two, for a model so small that a pass costs mostly
        its per-operator overhead) and their F follows the points' in the returned F, (k + 2n,)
        (``find_classes``: each input's class is set to its argmax at x before any target is
        taken). They are left out of the summed F, so no gradient flows from them.
        """
        leaf = points.detach().requires_grad_(True)
        k = leaf.shape[0]
        with torch.enable_grad():
            # A copy, not the leaf, enters the model: a model that writes into its input
            # (an in-place ReLU first) still differentiates, and the gradient arrives as the
            # exact float64 image of the model-precision one.
            if endpoints is None:
                f = self.target(self.output(leaf), idx)
                objective = f
            else:
                n = endpoints[0].shape[0]
                out = self.output(torch.cat([leaf, *endpoints]))
                if find_classes:
                    assert self.classes is not None
                    self.classes[:] = argmax_classes(out[k : k + n])
                f = self.target(out, torch.cat([idx, torch.arange(n), torch.arange(n)]))
                objective = f[:k]
            g = (
                torch.autograd.grad(objective.sum(), leaf, allow_unused=True)[0]
                if objective.requires_grad
                else None
            )
        return (torch.zeros_like(leaf) if g is None else g), f.detach().to(torch.float64)

    def values(self, points: torch.Tensor, idx: torch.Tensor) -> np.ndarray:
        """F (float64) at ``points`` of the inputs ``idx``, forward only (no graph kept)."""
        with torch.no_grad():
            return self.target(self.output(points), idx).to(torch.float64).cpu().numpy()

    def measure_sample_bytes(self, point: torch.Tensor, idx: torch.Tensor) -> int:
        """Bytes one path sample needs, from one probe step: the tensors autograd saves for
        backward (parameters and buffers excluded, storages counted once; the allocator's
        peak on CUDA if larger) plus the path point, its gradient and float64 work copies."""
        saved: dict[int, int] = {}
        param_ptrs = {p.untyped_storage().data_ptr() for p in self.model.parameters()}
        param_ptrs |= {b.untyped_storage().data_ptr() for b in self.model.buffers()}

        def pack(t: torch.Tensor) -> torch.Tensor:
            try:
                storage = t.untyped_storage()
                ptr, size = storage.data_ptr(), storage.nbytes()
            except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
                ptr, size = id(t), t.numel() * t.element_size()
            if ptr not in param_ptrs and ptr not in saved:
                saved[ptr] = size
            return t

        cuda = point.device.type == "cuda"
        before = 0
        if cuda:
            torch.cuda.synchronize(point.device)
            torch.cuda.reset_peak_memory_stats(point.device)
            before = torch.cuda.memory_allocated(point.device)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            self.grad(point, idx)
        measured = sum(saved.values())
        if cuda:
            measured = max(measured, torch.cuda.max_memory_allocated(point.device) - before)
        element_bytes = point[0].numel() * (2 * _itemsize(self.dtype) + 3 * 8)
        return max(1, int(_MEMORY_SAFETY_FACTOR * (measured / point.shape[0] + element_bytes)))


_CONVOLUTIONS: dict[int, tuple[type[nn.Module], ...]] = {
    4: (nn.Conv2d, nn.ConvTranspose2d),
    5: (nn.Conv3d, nn.ConvTranspose3d),
}
_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def preferred_memory_format(model: nn.Module, inputs: torch.Tensor) -> torch.memory_format:
    """The layout the path points are fed in: channels-last for a convolutional model with
    image (N, C, H, W) or volume (N, C, D, H, W) inputs on CPU, else contiguous.

    Same values, another memory layout, so the model computes the same function; but oneDNN
    picks other convolution kernels for it. On the example models (benchmarks/bench_ig.py)
    the input-gradient convolutions of the few-channel NCHW layers were the slowest part of
    a path step, and channels-last made the whole step 10-35% faster, with attributions
    within 3e-7 relative of the NCHW ones. Activations then stay channels-last through
    batch norm, ReLU, pooling, up-sampling and concatenation.
    """
    if inputs.device.type != "cpu" or inputs.dim() not in _CONVOLUTIONS:
        return torch.contiguous_format
    kinds = _CONVOLUTIONS[inputs.dim()]
    if not any(isinstance(module, kinds) for module in model.modules()):
        return torch.contiguous_format
    return _CHANNELS_LAST[inputs.dim()]


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def probe(
    evaluator: PathEvaluator, point: torch.Tensor, idx: torch.Tensor
) -> tuple[int, torch.memory_format]:
    """Bytes per path sample from one probe step, and the layout it ran in.

    A model that reshapes activations with ``view`` cannot take channels-last ones (the
    error names the strides); it is then fed contiguous points, which it was written for.
    """
    try:
        return evaluator.measure_sample_bytes(point, idx), evaluator.memory_format
    except RuntimeError:
        if evaluator.memory_format == torch.contiguous_format:
            raise
    evaluator.memory_format = torch.contiguous_format
    return evaluator.measure_sample_bytes(point, idx), evaluator.memory_format


def samples_per_chunk(
    per_sample_bytes: int, budget: int, device: torch.device, batch: int = 1
) -> int:
    """Samples per chunk: within the memory budget and, on CPU, within a cache-friendly
    working set (measured: one huge batch is slower on CPU than chunks of ~32 MiB).

    On CPU a chunk may still hold as many samples as the probe ``batch``, up to
    :data:`CPU_PROBE_SAMPLES`, past the working set (never past the budget). The working-set
    rule was measured on small models; a real-size one whose single sample is past it ran a
    forward+backward 13-18 % faster per sample in pairs than alone, hardly faster in fours
    and slower in eights (a ViT-S/16 and a ResNet-18 at 224x224, docs/ig.md "Chunks and
    memory"), and the probe batch's activations are what one training step holds anyway."""
    if device.type != "cpu":
        limit = budget
    else:
        probe_samples = per_sample_bytes * max(1, min(batch, CPU_PROBE_SAMPLES))
        limit = min(budget, max(CPU_WORKING_SET_BYTES, probe_samples))
    return max(1, min(limit // per_sample_bytes, 1 << 20))


def path_evaluator(
    model: nn.Module,
    x64: torch.Tensor,
    dtype: torch.dtype,
    classes: torch.Tensor | None,
    target_fn: Callable[[torch.Tensor], torch.Tensor] | None,
    find_classes: bool,
    model_info: dict[str, Any],
) -> tuple[PathEvaluator, int]:
    """The evaluator of the path integrand (in the memory format the model prefers) and the
    bytes one path sample needs, measured by one probe step per model and input shape."""
    n = x64.shape[0]
    key = (tuple(x64.shape[1:]), dtype, str(x64.device))
    cache = SAMPLE_BYTES.setdefault(model, {})
    layout = cache[key][1] if key in cache else preferred_memory_format(model, x64)
    evaluator = PathEvaluator(model, dtype, classes, target_fn, layout)
    if find_classes:  # the probe step needs input 0's class before the rest
        with torch.no_grad():
            evaluator.classes = torch.zeros(n, dtype=torch.long)
            evaluator.classes[:1] = argmax_classes(evaluator.output(x64[:1]))
    if key not in cache:  # one probe step per model and input shape
        cache[key] = probe(evaluator, x64[:1], torch.arange(n)[:1])
    model_info["memory_format"] = str(evaluator.memory_format).replace("torch.", "")
    return evaluator, cache[key][0]


# ----------------------------------------------------------------------------- evaluators


def share_sample_bytes(source: nn.Module, target: nn.Module) -> None:
    """Give ``target`` (a copy of ``source``'s architecture, other weights) the probe-step
    measurements of ``source``: activation memory and layout do not depend on the weights'
    values, so the copy need not spend a probe step of its own."""
    known = SAMPLE_BYTES.get(source)
    if known:
        SAMPLE_BYTES.setdefault(target, {}).update(known)


def path_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    baseline: torch.Tensor,
    t: np.ndarray,
    classes: np.ndarray | None,
    memory_budget_bytes: int,
) -> tuple[torch.Tensor, np.ndarray]:
    """The integrand's pieces at path positions ``t`` of every input, as the IG path computes
    them: ``(grads, f)`` with grads (len(t), N, ...) float64 and F (len(t), N).

    The points go through the model in the chunks (size and order) ``integrated_gradients``
    would use, so the same call repeated compares like with like (``ig_determinism``); the
    model runs in eval mode, its flags restored."""
    x64 = inputs.detach().to(torch.float64)
    b64 = torch.broadcast_to(baseline.detach().to(x64.device, torch.float64), x64.shape)
    dtype = inputs.dtype if inputs.is_floating_point() else torch.float32
    n = x64.shape[0]
    known = None if classes is None else torch.from_numpy(np.asarray(classes)).to(torch.long)
    ts = torch.as_tensor(np.asarray(t, dtype=np.float64), device=x64.device)
    points = torch.addcmul(b64.unsqueeze(0), ts.view(-1, *([1] * x64.dim())), (x64 - b64))
    points = points.reshape(-1, *x64.shape[1:])
    idx = torch.arange(n).repeat(len(ts))
    with eval_mode(model) as model_info:
        evaluator, per_sample = path_evaluator(model, x64, dtype, known, None, False, model_info)
        chunk = samples_per_chunk(per_sample, memory_budget_bytes, x64.device, n)
        grads, fs = [], []
        for start in range(0, points.shape[0], chunk):
            g, f = evaluator.grad(points[start : start + chunk], idx[start : start + chunk])
            grads.append(g.detach())
            fs.append(f.cpu().numpy())
    grad = torch.cat(grads).reshape(len(ts), *x64.shape)
    return grad, np.concatenate(fs).reshape(len(ts), n)
