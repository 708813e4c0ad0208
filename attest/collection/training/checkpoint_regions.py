"""Where activation checkpointing runs in a model, for the ``recompute`` check: every
``torch.utils.checkpoint`` region of a training step traced (:class:`Trace`: its module, its
saved-tensor bytes and forward time in :class:`Figures`) with recomputation on or off
(:func:`patched_checkpoint`), and the modules a spec's ``training.checkpoint`` globs name
wrapped in checkpoint (:func:`declared_modules`, :func:`wrap`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

import torch
import torch.utils.checkpoint as torch_checkpoint
from torch import nn

from attest.collection.training import state_diff as sd

__all__ = ["Figures", "Region", "Trace", "declared_modules", "patched_checkpoint", "wrap"]


@dataclass(eq=False)
class Figures:
    """What one module or region kept for backward, measured without recomputation: the
    storages packed by ``saved_tensors_hooks`` inside it and those of its tensor inputs (which
    a checkpoint keeps instead), by storage address, and its forward time."""

    saved: dict[int, int] = field(default_factory=dict)
    inputs: dict[int, int] = field(default_factory=dict)
    forward_s: float = 0.0
    calls: int = 0

    @property
    def freed(self) -> int:
        """Bytes checkpointing frees: saved inside, not inputs."""
        return sum(n for key, n in self.saved.items() if key not in self.inputs)


@dataclass(eq=False)
class Region:
    """One function run under ``torch.utils.checkpoint`` (by the model, or by us)."""

    module: str
    function: str
    reentrant: bool
    preserve_rng_state: bool
    declared: bool = False
    recomputed: bool = False  # its function ran again during the backward pass
    figures: Figures = field(default_factory=Figures)

    @property
    def key(self) -> str:
        return f"{self.module}:{self.function}"


class Trace:
    """The bookkeeping of one training step: which modules and regions are running, what they
    save, which random operators and state writes happen, in which phase."""

    def __init__(self, model: nn.Module, *, recompute: bool, declared: set[str]) -> None:
        self.names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
        self.recompute, self.declared = recompute, declared
        self.phase = "forward"
        self.modules_on: list[str] = []
        self.regions_on: list[Region] = []
        self.regions: dict[str, Region] = {}
        self.modules: dict[str, Figures] = {}
        self.packed: dict[int, int] = {}
        self._starts: list[float] = []
        # Parameters and buffers are not activations: their storages are never counted.
        self.excluded = {sd.storage_key(t)[0] for t in [*model.parameters(), *model.buffers()]}
        self.observer = sd.StepObserver(sd.state_paths(model), self.where)

    def where(self) -> tuple[str, str | None, str]:
        """(phase, innermost open region, innermost running module)."""
        region = self.regions_on[-1].key if self.regions_on else None
        return self.phase, region, self.modules_on[-1] if self.modules_on else ""

    def hook(self, model: nn.Module) -> list[Any]:
        """Forward hooks on every module (always called, so an early-stopped recomputation
        that raises out of a module still leaves the stack right)."""
        handles = []
        for module in model.modules():
            handles.append(module.register_forward_pre_hook(self._pre))
            handles.append(module.register_forward_hook(self._post, always_call=True))
        return handles

    def _pre(self, module: nn.Module, args: Any) -> None:
        name = self.names.get(id(module), "?")
        self.modules_on.append(name)
        if self.phase == "forward":
            figures = self.modules.setdefault(name, Figures())
            figures.calls += 1
            sd.add_storages(figures.inputs, args, self.excluded)
        self._starts.append(time.perf_counter())

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        name = self.modules_on.pop() if self.modules_on else "?"
        started = self._starts.pop() if self._starts else time.perf_counter()
        if self.phase == "forward" and name in self.modules:
            self.modules[name].forward_s += time.perf_counter() - started

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        """The saved-tensor pack hook: the storage counted for every open module and region."""
        key, nbytes = sd.storage_key(t)
        if key and key not in self.excluded:
            self.packed[key] = nbytes
            for name in set(self.modules_on):
                self.modules[name].saved[key] = nbytes
            for region in set(self.regions_on):
                region.figures.saved[key] = nbytes
        return t

    def open(self, fn: Callable[..., Any], preserve: bool, reentrant: bool, args: Any) -> Region:
        """Enter a checkpoint region (counted and its inputs noted in the forward phase)."""
        module, function = self._region_name(fn)
        region = self.regions.get(f"{module}:{function}")
        if region is None:
            region = Region(module, function, reentrant, preserve, module in self.declared)
            self.regions[region.key] = region
        region.preserve_rng_state = region.preserve_rng_state and preserve
        if self.phase == "forward":
            region.figures.calls += 1
            sd.add_storages(region.figures.inputs, args, self.excluded)
        self.regions_on.append(region)
        return region

    def close(self, region: Region) -> None:
        if self.regions_on and self.regions_on[-1] is region:
            self.regions_on.pop()

    def marked(self, region: Region, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` that marks its region open while it runs: checkpoint recomputes through it."""

        def run(*args: Any, **kwargs: Any) -> Any:
            region.recomputed = region.recomputed or self.phase == "backward"
            self.regions_on.append(region)
            try:
                return fn(*args, **kwargs)
            finally:
                self.close(region)

        return run

    def _region_name(self, fn: Callable[..., Any]) -> tuple[str, str]:
        """The region's module (the module the function is, or is a method of, else the
        module running when checkpoint was called) and its function's name."""
        target: Any = fn
        while isinstance(target, functools.partial):
            target = target.func
        owner = target if isinstance(target, nn.Module) else getattr(target, "__self__", None)
        function = getattr(target, "__qualname__", type(target).__name__)
        if isinstance(owner, nn.Module) and id(owner) in self.names:
            return self.names[id(owner)], function
        return (self.modules_on[-1] if self.modules_on else ""), function


@contextlib.contextmanager
def patched_checkpoint(trace: Trace) -> Iterator[None]:
    """Route every ``torch.utils.checkpoint.checkpoint`` call through ``trace``.

    ``checkpoint`` looks up ``CheckpointFunction`` (reentrant) and
    ``_checkpoint_without_reentrant_generator`` (non-reentrant) in its module's globals at
    each call, so replacing those two names sees every region however the model imported
    ``checkpoint`` (``from torch.utils.checkpoint import checkpoint`` binds the function, not
    these names), ``checkpoint_sequential`` included. Patching ``checkpoint`` itself would
    miss the bound imports; observing saved-tensor hooks alone could not turn recomputation
    off. With ``trace.recompute`` the real implementations run with the function marked;
    without, the function runs plainly (its activations saved), timed.
    """
    real_function = torch_checkpoint.CheckpointFunction
    real_generator = torch_checkpoint._checkpoint_without_reentrant_generator
    fixed = [p.kind for p in inspect.signature(real_generator).parameters.values()].index(
        inspect.Parameter.VAR_POSITIONAL
    )  # fn, preserve_rng_state, ... before *args

    class Reentrant:
        @staticmethod
        def apply(function: Callable[..., Any], preserve: bool, *args: Any) -> Any:
            region = trace.open(function, bool(preserve), True, args)
            try:
                if trace.recompute:
                    marked = trace.marked(region, function)
                    return real_function.apply(marked, preserve, *args)  # type: ignore[no-untyped-call]
                started = time.perf_counter()
                out = function(*args)  # plainly: its activations saved, timed
                region.figures.forward_s += time.perf_counter() - started
                return out
            finally:
                trace.close(region)

    def generator(fn: Callable[..., Any], *rest: Any, **kwargs: Any) -> Iterator[None]:
        preserve = bool(rest[0]) if rest else True
        region = trace.open(fn, preserve, False, (rest[fixed - 1 :], kwargs))
        try:
            if trace.recompute:
                yield from real_generator(trace.marked(region, fn), *rest, **kwargs)
            else:
                started = time.perf_counter()
                yield  # checkpoint() runs the function between the two next() calls
                region.figures.forward_s += time.perf_counter() - started
        finally:
            trace.close(region)

    torch_checkpoint.CheckpointFunction = Reentrant  # type: ignore[misc,assignment]
    torch_checkpoint._checkpoint_without_reentrant_generator = generator
    try:
        yield
    finally:
        torch_checkpoint.CheckpointFunction = real_function  # type: ignore[misc]
        torch_checkpoint._checkpoint_without_reentrant_generator = real_generator


def declared_modules(model: nn.Module, patterns: list[str]) -> list[str]:
    """The outermost modules whose names match a ``training.checkpoint`` glob."""
    names = [n for n, _ in model.named_modules() if n and any(fnmatch(n, p) for p in patterns)]
    return [n for n in names if not any(n.startswith(o + ".") for o in names if o != n)]


def wrap(module: nn.Module) -> None:
    """Run ``module``'s forward under non-reentrant checkpoint (an instance attribute that
    ``Module.__call__`` finds before the class's forward; hooks still run outside)."""
    original = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        return torch_checkpoint.checkpoint(original, *args, use_reentrant=False, **kwargs)

    module.forward = forward
