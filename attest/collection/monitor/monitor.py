"""``attest.TrainingMonitor``: gradient assurance figures sampled during training.

Used from a plain PyTorch loop with one call per step::

    monitor = attest.TrainingMonitor(model, loss_fn, (x_probe, y_probe), every=50,
                                     log="run.jsonl")
    for epoch in range(epochs):
        for batch in loader:
            ...  # the training step, unchanged
            monitor.step(epoch=epoch, step=global_step)
            global_step += 1
    monitor.close()

At each sample point (``step % every == 0``) the fixed probe runs, in eval mode as
``attest collect``'s checks do (so BatchNorm statistics and dropout masks of the training are
not touched), twice in the model's own precision and once against a float64 version of the
current weights (``torch.func.functional_call`` with float64 copies of the parameters and
buffers: the module itself is never copied or changed). Gradients are taken with
``torch.autograd.grad``, so no ``.grad`` is written; the RNG state is forked and restored and
every module's ``training`` flag is put back. The figures (docs/training-monitor.md) go into
one durable JSON line of the log (:mod:`attest.evidence.training_log`).
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attest.collection.profile.op_metrics import bits_equal, fidelity_pct, relative_error
from attest.core.times import format_timestamp
from attest.errors import InputError
from attest.evidence.training_log import SampleRecord, StartRecord, TrainingLogWriter

__all__ = ["DEFAULT_EVERY", "TrainingMonitor", "probe_pair"]

DEFAULT_EVERY = 50  # steps between sample points; docs/benchmarks.md has its overhead
_ROOT = "<root>"


def probe_pair(probe: Any) -> tuple[Any, Any]:
    """``(inputs, target)`` from a pair, a mapping with ``x`` and ``target`` (the probe files'
    keys) or the path of a ``.safetensors`` probe file holding them."""
    if isinstance(probe, (str, Path)):
        from safetensors.torch import load_file

        try:
            probe = load_file(str(probe))
        except (OSError, ValueError, RuntimeError) as exc:
            raise InputError(f"cannot read probe file {probe}: {exc}") from None
    if isinstance(probe, Mapping):
        missing = [k for k in ("x", "target") if k not in probe]
        if missing:
            raise InputError(
                f"the monitor's probe mapping has no {missing[0]!r}",
                hint="give {'x': inputs, 'target': target} or an (inputs, target) pair",
            )
        return probe["x"], probe["target"]
    if isinstance(probe, (tuple, list)) and len(probe) == 2:
        return probe[0], probe[1]
    raise InputError(
        f"the monitor's probe is a {type(probe).__name__}",
        hint="give an (inputs, target) pair or a mapping with 'x' and 'target'",
    )


def _to(value: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    """Tensors (also inside tuples, lists and mappings) on ``device``; floating ones in
    ``dtype`` (integer ids and bool masks are never cast)."""
    if isinstance(value, torch.Tensor):
        wanted = dtype if dtype is not None and value.is_floating_point() else None
        return value.detach().to(device=device, dtype=wanted)
    if isinstance(value, (tuple, list)):
        return type(value)(_to(v, device, dtype) for v in value)
    if isinstance(value, Mapping):
        return {k: _to(v, device, dtype) for k, v in value.items()}
    return value


def _arguments(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The model's positional and keyword arguments: a tuple is positional, a mapping keyword
    (``{"input_ids": ids, "attention_mask": mask}``), anything else the one argument."""
    if isinstance(inputs, tuple):
        return inputs, {}
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    return (inputs,), {}


def _call(model: nn.Module, inputs: Any) -> Any:
    args, kwargs = _arguments(inputs)
    return model(*args, **kwargs)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


class _SavedBytes:
    """Bytes of the distinct storages the forward saves for the backward (a pack hook that
    only looks: it returns the tensor it is given)."""

    def __init__(self) -> None:
        self.storages: dict[tuple[int, str], int] = {}

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        self.storages[(storage.data_ptr(), str(tensor.device))] = storage.nbytes()
        return tensor

    @staticmethod
    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    @property
    def total(self) -> int:
        return sum(self.storages.values())


class TrainingMonitor:
    """Samples gradient fidelity, bit-exactness, gradient norms, non-finite counts, the
    forward-to-backward memory delta, the loss scale and the step time during training.

    ``probe``: an ``(inputs, target)`` pair, a mapping with ``x`` and ``target``, or a probe
    ``.safetensors`` file; ``loss_fn(model(inputs), target)`` must give a scalar. ``inputs``
    may be a tuple (positional arguments) or a mapping (keyword arguments, e.g. token ids and
    an attention mask); integer and bool tensors are never cast. ``every``:
    steps between sample points. ``log``: the JSONL file, appended to (a restart continues the
    last run in it unless ``run_id`` names another). ``grad_scaler``: a
    ``torch.amp.GradScaler`` whose scale is recorded.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Any,
        probe: Any,
        *,
        every: int = DEFAULT_EVERY,
        log: str | Path = "run.jsonl",
        run_id: str | None = None,
        grad_scaler: Any = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise InputError(f"TrainingMonitor needs a torch.nn.Module, got {type(model).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise InputError(f"TrainingMonitor: every={every!r} must be a positive integer")
        if not callable(loss_fn):
            raise InputError("TrainingMonitor: loss_fn must be callable as loss_fn(output, target)")
        self.model, self.loss_fn, self.every, self.grad_scaler = model, loss_fn, every, grad_scaler
        self.params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not self.params:
            raise InputError("TrainingMonitor: the model has no trainable parameter")
        self.device = self.params[0][1].device
        inputs, target = probe_pair(probe)
        self.inputs = _to(inputs, self.device)
        self.target = _to(target, self.device)
        self.writer = TrainingLogWriter(log)
        existing = self.writer.existing
        known = existing.run_ids if existing else []
        self.run_id: str = run_id or (known[-1] if known else uuid.uuid4().hex[:16])
        previous = [s for s in (existing.starts if existing else []) if s.run_id == self.run_id]
        self.attempt = len(previous)
        self._last_return: float | None = None
        self.writer.append(
            StartRecord(
                run_id=self.run_id,
                attempt=self.attempt,
                started_at=format_timestamp(datetime.now(timezone.utc)),
                every=every,
                model=type(model).__name__,
                parameters=sum(p.numel() for _, p in self.params),
                device=str(self.device),
                torch=torch.__version__,
                probe=self._probe_description(),
                last_logged_step=existing.last_step(self.run_id) if existing else None,
            )
        )

    def _probe_description(self) -> dict[str, Any]:
        def describe(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return {
                    "shape": list(value.shape),
                    "dtype": str(value.dtype).removeprefix("torch."),
                }
            if isinstance(value, (tuple, list)):
                return [describe(v) for v in value]
            if isinstance(value, Mapping):
                return {str(k): describe(v) for k, v in value.items()}
            return type(value).__name__

        return {"x": describe(self.inputs), "target": describe(self.target)}

    # -- the training loop's call
    def step(self, *, epoch: int, step: int) -> SampleRecord | None:
        """Call once per training step (``step``: the global step, counting on across
        epochs). Returns the record written at a sample point, else None (also for a step the
        log already holds, replayed after a restart)."""
        now = time.perf_counter()
        step_wall = now - self._last_return if self._last_return is not None else None
        for name, value in (("epoch", epoch), ("step", step)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"TrainingMonitor.step: {name}={value!r} must be an integer >= 0")
        try:
            if step % self.every != 0 or self.writer.logged(self.run_id, step):
                return None
            record = self.sample(epoch=epoch, step=step, step_wall_s=step_wall)
            self.writer.append(record)
            return record
        finally:
            self._last_return = time.perf_counter()

    def sample(self, *, epoch: int, step: int, step_wall_s: float | None = None) -> SampleRecord:
        """Measure the probe now (not written to the log; :meth:`step` writes it)."""
        start = time.perf_counter()
        with self._untouched():
            grads, loss, saved, allocated = self._pass(measure=True)
            repeat, _, _, _ = self._pass(measure=False)
            reference = self._float64_grads()
        figures = self._figures(grads, repeat, reference)
        scale = None
        if self.grad_scaler is not None and self.grad_scaler.is_enabled():
            scale = float(self.grad_scaler.get_scale())
        return SampleRecord(
            run_id=self.run_id,
            attempt=self.attempt,
            step=step,
            epoch=epoch,
            time=format_timestamp(datetime.now(timezone.utc)),
            loss=_finite(loss),
            saved_tensor_bytes=saved,
            allocator_delta_bytes=allocated,
            loss_scale=scale,
            step_wall_s=step_wall_s,
            monitor_wall_s=time.perf_counter() - start,
            **figures,
        )

    @contextlib.contextmanager
    def _untouched(self) -> Iterator[None]:
        """RNG state forked and restored, every module's mode put back, eval mode inside."""
        modes = [(m, m.training) for m in self.model.modules()]
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            try:
                self.model.eval()
                yield
            finally:
                for module, mode in modes:
                    module.training = mode

    def _loss(self, output: Any, target: Any) -> torch.Tensor:
        loss = self.loss_fn(output, target)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise InputError("TrainingMonitor: loss_fn(output, target) must return a scalar tensor")
        return loss.reshape(())

    def _pass(self, *, measure: bool) -> tuple[list[torch.Tensor | None], float, int, int | None]:
        """One forward and backward in the model's precision: the gradients, the loss, the
        saved-tensor bytes and (CUDA) the allocator's forward-to-backward delta."""
        saved = _SavedBytes()
        cuda = measure and self.device.type == "cuda"
        before = torch.cuda.memory_allocated(self.device) if cuda else 0
        hooks = (
            torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack)
            if measure
            else contextlib.nullcontext()
        )
        with hooks:
            loss = self._loss(_call(self.model, self.inputs), self.target)
        allocated = torch.cuda.memory_allocated(self.device) - before if cuda else None
        grads = torch.autograd.grad(loss, [p for _, p in self.params], allow_unused=True)
        return (
            [g.detach() if g is not None else None for g in grads],
            float(loss.detach()),
            saved.total,
            allocated,
        )

    def _float64_grads(self) -> list[torch.Tensor | None]:
        """The gradients of a float64 copy of the current weights and buffers (the module's
        own code, through ``torch.func.functional_call``)."""
        wide = {
            name: p.detach().to(torch.float64).requires_grad_(p.requires_grad)
            for name, p in self.model.named_parameters()
        }
        for name, b in self.model.named_buffers():
            wide[name] = b.detach().to(torch.float64) if b.is_floating_point() else b
        inputs = _to(self.inputs, self.device, torch.float64)
        target = _to(self.target, self.device, torch.float64)
        call_args, call_kwargs = _arguments(inputs)
        output = torch.func.functional_call(self.model, wide, call_args, call_kwargs)
        loss = self._loss(output, target)
        grads = torch.autograd.grad(loss, [wide[n] for n, _ in self.params], allow_unused=True)
        return [g.detach() if g is not None else None for g in grads]

    def _figures(
        self,
        grads: list[torch.Tensor | None],
        repeat: list[torch.Tensor | None],
        reference: list[torch.Tensor | None],
    ) -> dict[str, Any]:
        per_param: dict[str, float | None] = {}
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        module_sq: dict[str, float] = {}
        nonfinite: dict[str, int] = {}
        same = 0
        for (name, _), g, g2, g64 in zip(self.params, grads, repeat, reference, strict=True):
            both = g is not None and g2 is not None
            same += (g is None and g2 is None) or (both and bits_equal(g, g2))  # type: ignore[arg-type]
            if g is None or g64 is None:
                continue
            pairs.append((g, g64))
            per_param[name] = fidelity_pct(relative_error([(g, g64)]))
            bad = int((~torch.isfinite(g)).sum())
            if bad:
                nonfinite[name] = bad
            module = name.rpartition(".")[0] or _ROOT
            sq = float(torch.linalg.vector_norm(g, dtype=torch.float64)) ** 2
            module_sq[module] = module_sq.get(module, 0.0) + sq
        defined = [v for v in per_param.values() if v is not None]
        total_sq = sum(module_sq.values())
        return {
            "fidelity_pct": fidelity_pct(relative_error(pairs)) if pairs else None,
            "min_fidelity_pct": min(defined) if defined else None,
            "param_fidelity_pct": per_param,
            "bit_exact_rate": same / len(self.params),
            "grad_norm": _finite(math.sqrt(total_sq)),
            "grad_norms": {m: _finite(math.sqrt(v)) for m, v in module_sq.items()},
            "nonfinite": sum(nonfinite.values()),
            "nonfinite_params": nonfinite,
        }

    def close(self) -> None:
        """Close the log (every record is already on disk)."""
        self.writer.close()

    def __enter__(self) -> TrainingMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
