"""The values ATen calls take and return, as the collect side handles them.

Walking and mapping the tensors of an argument or output structure (plain lists, tuples and
dicts: a direct walk, pytree for anything else), the outputs of an operator that carry
results (fused RNN kernels also return a scratch workspace), and the :class:`TensorVault`
that keeps tensors seen during a run unchanged without copying them up front (copy on write,
driven by the capture's ``before_write``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

__all__ = [
    "SCRATCH_OUTPUTS",
    "TensorVault",
    "VaultBox",
    "flat_tensors",
    "map_tensors",
    "measured_outputs",
    "op_name",
    "saved_tensors_of",
    "snapshot_written",
    "tensor_storage",
]


def op_name(func: Any) -> str:
    """``aten.convolution.default`` for an OpOverload."""
    return str(func)


def _collect_tensors(value: Any, out: list[torch.Tensor]) -> bool:
    """Append the tensors of an ATen argument or output (a tensor, scalar, None, or plain
    list/tuple/dict of them, nested) to ``out``; False for any other container."""
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif type(value) in (list, tuple):
        for v in value:
            if not _collect_tensors(v, out):
                return False
    elif type(value) is dict:
        for v in value.values():
            if not _collect_tensors(v, out):
                return False
    elif isinstance(value, (list, tuple, dict)):  # namedtuple, OrderedDict...: pytree's job
        return False
    return True


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """All tensors in a (nested) op output or argument structure, in pytree order.

    ATen arguments and outputs are plain lists, tuples and dicts: walked directly, because
    ``tree_flatten`` costs several microseconds per call and this runs for every operator of
    every run; anything else goes through pytree.
    """
    out: list[torch.Tensor] = []
    if _collect_tensors(value, out):
        return out
    leaves, _ = tree_flatten(value)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """``value`` with every tensor replaced by ``fn(tensor)`` (same containers); a direct
    walk of plain lists/tuples/dicts as in :func:`flat_tensors`, pytree for anything else."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(map_tensors(fn, v) for v in value)
    if kind is dict:
        return {k: map_tensors(fn, v) for k, v in value.items()}
    if isinstance(value, (list, tuple, dict)):
        return tree_map(lambda v: fn(v) if isinstance(v, torch.Tensor) else v, value)
    return value


# Outputs that are a kernel's scratch space, not a result: fused RNN kernels return their
# workspace/reserve buffer (read only by their own backward), whose bytes are partly
# uninitialized. Comparing them between runs, or against float64, measures nothing; the
# operator's real outputs are still measured. (index of the output in the op's returns)
SCRATCH_OUTPUTS: dict[str, frozenset[int]] = {
    "aten.mkldnn_rnn_layer.default": frozenset({3}),
    "aten._cudnn_rnn.default": frozenset({3}),
    "aten.miopen_rnn.default": frozenset({3}),
}


def measured_outputs(op: str, out: Any) -> list[torch.Tensor]:
    """The op's output tensors that carry results (:data:`SCRATCH_OUTPUTS` left out)."""
    scratch = SCRATCH_OUTPUTS.get(op)
    if scratch and isinstance(out, (tuple, list)):
        return [v for k, v in enumerate(out) if isinstance(v, torch.Tensor) and k not in scratch]
    return flat_tensors(out)


class VaultBox:
    """A stable snapshot of one tensor held by a :class:`TensorVault`; read ``box.value``."""

    __slots__ = ("value",)

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


class TensorVault:
    """Keeps tensors seen during a run unchanged without copying them up front.

    :meth:`keep` stores an alias; just before an ATen call writes into a storage the vault
    holds (an in-place op such as ``relu_`` or ``out += identity``), :meth:`before_write`
    replaces the alias by a clone (copy on write). So references cost only the memory of
    tensors that would otherwise have been freed or overwritten.
    """

    def __init__(self) -> None:
        self._by_storage: dict[int, list[VaultBox]] = {}
        self.copies = 0

    def keep(self, tensor: torch.Tensor) -> VaultBox:
        """A box holding a stable alias of ``tensor``."""
        alias = tensor.detach()
        ptr = _storage_ptr(alias)
        if ptr is None:
            return VaultBox(alias.clone())
        box = VaultBox(alias)
        self._by_storage.setdefault(ptr, []).append(box)
        return box

    def before_write(self, tensor: torch.Tensor) -> None:
        """Freeze (clone) every kept alias of ``tensor``'s storage before it is written."""
        ptr = _storage_ptr(tensor)
        if ptr is None:
            return
        boxes = self._by_storage.pop(ptr, None)
        if boxes:
            for box in boxes:
                box.value = box.value.clone()
                self.copies += 1

    def clear(self) -> None:
        """Stop watching writes (the kept tensors stay where they are)."""
        self._by_storage.clear()


def tensor_storage(tensor: torch.Tensor) -> torch.UntypedStorage | None:
    """The storage behind ``tensor``; None for a tensor without a plain one (PyTorch raises
    for some subclasses and layouts) or with no memory (data pointer 0)."""
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return storage if storage.data_ptr() else None


def _storage_ptr(tensor: torch.Tensor) -> int | None:
    storage = tensor_storage(tensor)
    return int(storage.data_ptr()) if storage is not None else None


def _written_args(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """Tensor arguments the ATen schema marks as written (``Tensor(a!)``)."""
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    out: list[torch.Tensor] = []
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        value = kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]
        out.extend(flat_tensors(value))
    return out


def snapshot_written(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments of a call about to write into some of them, with a copy of every tensor
    argument that shares storage with a written one (the written argument itself, and any
    other view of the same storage such as ``x.add_(x)`` or ``x[:, :2] += x[:, 2:]``).
    None when the call writes nothing. Call it just before the call runs."""
    written = _written_args(func, args, kwargs)
    if not written:
        return None
    ptrs = {p for p in (_storage_ptr(t) for t in written) if p is not None}

    def copy(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and (
            _storage_ptr(value) in ptrs or any(value is t for t in written)
        ):
            return value.detach().clone()
        return value

    return tuple(map_tensors(copy, list(args))), dict(map_tensors(copy, kwargs))


_SAVED_ATTRS: dict[type, list[str]] = {}


def saved_tensors_of(node: Any) -> list[torch.Tensor]:
    """The tensors an autograd node saved for backward (built-in and custom Function nodes)."""
    cls = type(node)
    names = _SAVED_ATTRS.get(cls)
    if names is None:
        names = [
            a
            for a in dir(cls)
            if a.startswith("_saved_") and not a.endswith(("_sym_sizes", "_sym_strides"))
        ]
        _SAVED_ATTRS[cls] = names
    found: list[torch.Tensor] = []
    for name in names:
        try:
            value = getattr(node, name)
        except Exception:  # an already-freed or non-tensor saved value
            continue
        found.extend(flat_tensors(value))
    saved = getattr(node, "saved_tensors", None)  # custom autograd.Function (ctx.save_for_backward)
    if saved is not None and not names:
        with suppress(Exception):
            found.extend(flat_tensors(tuple(saved)))
    return found
