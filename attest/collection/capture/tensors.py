"""The values ATen calls take and return, as the collect side handles them.

Walking and mapping the tensors of an argument or output structure (plain lists, tuples and
dicts: a direct walk, pytree for anything else), the outputs of an operator that carry
results (fused RNN kernels also return a scratch workspace), and the :class:`TensorVault`
that keeps tensors seen during a run unchanged without copying them up front (copy on write,
driven by the capture's ``before_write``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch.utils._pytree import tree_flatten, tree_map

__all__ = [
    "SCRATCH_OUTPUTS",
    "SavedTensors",
    "TensorVault",
    "VaultBox",
    "flat_tensors",
    "map_tensors",
    "measured_outputs",
    "op_name",
    "saved_tensors_hooks_active",
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


class SavedTensors(NamedTuple):
    """What :func:`saved_tensors_of` found on one autograd node."""

    tensors: list[torch.Tensor]  # the saved tensors it could read without side effects
    packed: int  # saved values a saved-tensors pack hook holds: left unread, bytes unknown


# Per node class: (attribute, its raw SavedTensor counterpart or None). Built-in nodes expose
# each saved value as ``_saved_<name>`` (unpacked on every read) and, for tensors,
# ``_raw_saved_<name>`` (the SavedTensor itself); custom Functions as ``saved_tensors`` /
# ``_raw_saved_tensors``.
_SAVED_ATTRS: dict[type, list[tuple[str, str | None]]] = {}


def _saved_attributes(cls: type) -> list[tuple[str, str | None]]:
    names = _SAVED_ATTRS.get(cls)
    if names is None:
        members = set(dir(cls))
        names = [
            (a, raw if (raw := "_raw" + a) in members else None)
            for a in sorted(members)
            if a.startswith("_saved_") and not a.endswith(("_sym_sizes", "_sym_strides"))
        ]
        if not names and "saved_tensors" in members:  # custom autograd.Function
            raw = "_raw_saved_tensors"
            names = [("saved_tensors", raw if raw in members else None)]
        _SAVED_ATTRS[cls] = names
    return names


def _hooked(raw: Any) -> int | None:
    """How many of the SavedTensors in ``raw`` (one, a sequence of them, or None) a pack hook
    holds; None when this torch does not say (SavedTensor.unpack_hook is recent)."""
    items = raw if isinstance(raw, (tuple, list)) else (raw,)
    count = 0
    for item in items:
        if item is None:
            continue
        if not hasattr(item, "unpack_hook"):
            return None
        count += item.unpack_hook is not None
    return count


# The hook pair autograd would pack with now (False: as SavedVariable asks, tracing honoured).
_TOP_HOOKS: Callable[[bool], Any] | None = getattr(
    torch._C._autograd, "_top_saved_tensors_default_hooks", None
)


def saved_tensors_hooks_active() -> bool:
    """Whether a default saved-tensors hook pair (``torch.autograd.graph.saved_tensors_hooks``:
    non-reentrant checkpoint, ``save_on_cpu``, a model's own) packs what autograd saves now."""
    return _TOP_HOOKS is not None and _TOP_HOOKS(False) is not None


def saved_tensors_of(node: Any, *, hooks_active: bool = False) -> SavedTensors:
    """The tensors an autograd node saved for backward (built-in and custom Function nodes),
    read only where reading has no side effect.

    Reading ``_saved_<name>`` (or ``saved_tensors``) unpacks: a value a saved-tensors hook
    packed goes through its unpack hook, and non-reentrant checkpoint's unpack hook recomputes
    the whole region, during the forward pass (it then raises CheckpointError, and the region
    runs again at every later read: the model's forward becomes another computation). So such
    values are left packed and only counted: per value from the raw SavedTensor's
    ``unpack_hook`` where torch exposes it, else all of the node's values when
    ``hooks_active`` (a default hook pair was active when the node's operator ran, see
    :func:`saved_tensors_hooks_active`; the caller records that at dispatch time, since the
    node of a region's last operator is read after the region has closed).
    """
    found: list[torch.Tensor] = []
    packed = 0
    for name, raw_name in _saved_attributes(type(node)):
        if raw_name is not None:
            try:
                hooked = _hooked(getattr(node, raw_name))
            except Exception:  # an already-freed saved value: nothing to read
                continue
            if hooked is None and hooks_active:
                hooked = 1
            if hooked:
                packed += hooked
                continue
        elif hooks_active and name == "saved_tensors":
            packed += 1
            continue
        try:
            value = getattr(node, name)
        except Exception:  # an already-freed or non-tensor saved value
            continue
        found.extend(flat_tensors(tuple(value) if name == "saved_tensors" else value))
    return SavedTensors(found, packed)
