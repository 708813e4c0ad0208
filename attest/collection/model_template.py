"""Copies of one built model instead of a build per use, when a build is reproducible.

A collect asks for a fresh model instance some thirty times (each determinism repeat, each IG
piece and randomization stage, the topology and fidelity passes...). A build is the user's
factory with its weight initialisation, then ``load_state_dict``: 0.12 s on a MONAI ViT
against 0.02 s for ``copy.deepcopy`` of a built one, so the builds alone were 4 s (18 F) of
its collect. :class:`ModelTemplate` builds once and hands out deep copies, which hold the same
parameters, buffers and plain attributes as a build would, only when that is true of this
factory: it builds a second instance with every random generator the factory may draw from
(torch's, Python's, numpy's) seeded otherwise, and compares every parameter, buffer and
tensor attribute bit for bit. A factory whose instances differ (a random projection kept as a
plain attribute, an unseeded generator of its own) keeps a build per use, as before: the
determinism repeats then see what they saw before. A model ``copy.deepcopy`` refuses is built
each time too.

Neither the template's build nor a copy draws from the global random generators (the builds
run under saved and restored generator states), so what a check draws after taking a model
does not depend on whether this process had built the template already (a piece computed in
a worker process sees the same draws as in the collecting process).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

__all__ = ["ModelTemplate", "same_instances"]


@contextmanager
def _generators_kept(seed: int | None = None) -> Iterator[None]:
    """torch's (CPU), Python's and numpy's global generators restored afterwards; seeded with
    ``seed`` for the duration when given."""
    python_state = random.getstate()
    numpy_state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
            random.seed(seed)
            np.random.seed(seed & 0xFFFFFFFF)  # numpy takes 32-bit seeds
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def _tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Every parameter, buffer and tensor-valued plain attribute, by qualified name, and the
    state of every random generator a module keeps as an attribute (one seeded from the
    global generator at build time makes builds differ as much as a random buffer does)."""
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                yield f"{prefix}.{name}", value
            elif isinstance(value, torch.Generator):
                yield f"{prefix}.{name}#state", value.get_state()
        for group in (module._parameters, module._buffers):
            for name, tensor in group.items():
                if tensor is not None:
                    yield f"{prefix}.{name}", tensor


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device or a.layout != b.layout:
        return False
    if a.layout != torch.strided:  # sparse or other layouts: not compared, so not copied
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.is_floating_point():  # NaN where both have NaN counts as equal
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def same_instances(a: nn.Module, b: nn.Module) -> bool:
    """Whether two builds hold the same module tree and the same tensors, bit for bit."""
    if [n for n, _ in a.named_modules()] != [n for n, _ in b.named_modules()]:
        return False
    left, right = dict(_tensors(a)), dict(_tensors(b))
    if left.keys() != right.keys():
        return False
    try:
        return all(_same_bits(left[name], right[name]) for name in left)
    except Exception:  # a tensor that cannot be compared here (meta, a subclass): not the same
        return False


class ModelTemplate:
    """Fresh instances of ``build``'s model: deep copies of one build when builds are
    reproducible, a build each time otherwise (see the module docstring)."""

    def __init__(self, build: Callable[[], nn.Module], seed: int = 0) -> None:
        self._build = build
        self._seed = seed
        self._template: nn.Module | None = None
        self._decided = False
        self.copies = 0  # instances handed out as copies (the tests read it)

    def new(self) -> nn.Module:
        """A fresh instance, as ``build`` returns it."""
        if not self._decided:
            self._decide()
        if self._template is not None:
            self.copies += 1
            return copy.deepcopy(self._template)
        return self._build()

    def release(self) -> None:
        """Drop the template (a later :meth:`new` decides again)."""
        self._template = None
        self._decided = False

    def _decide(self) -> None:
        self._decided = True
        with _generators_kept(self._seed):
            first = self._build()
        with _generators_kept(self._seed ^ 0x5DEECE66D):
            second = self._build()
        if not same_instances(first, second):
            return  # the factory's instances differ: a build per use
        try:
            copy.deepcopy(first)
        except Exception:  # a module deepcopy refuses (an open handle, a lock): build each time
            return
        self._template = first
