"""Reading and rebuilding the arguments of one captured ATen call (an :class:`OpRecord`).

The gradient checks re-run a captured operator alone: in float64 for finite differences, with
a few inputs replaced (sliced, nudged off a kink). These helpers name each argument by the
operator's schema, so checks can say "not differentiable with respect to ``running_mean``"
and detectors can read ``kernel_size`` without guessing positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = [
    "BoundCall",
    "bind_schema",
    "floating",
    "op_short_name",
    "to_float64",
]


def op_short_name(op: str) -> str:
    """``relu`` for ``aten.relu_.default`` (namespace, overload and in-place suffix dropped)."""
    parts = op.split(".")
    name = parts[1] if len(parts) >= 2 else parts[0]
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name


def floating(value: Any) -> bool:
    """A real floating-point tensor (what finite differences can perturb)."""
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def bind_schema(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by schema name, defaults filled in (positional order kept)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return {f"arg{i}": a for i, a in enumerate(args)} | dict(kwargs)
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if not arg.kwarg_only and i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


def to_float64(value: Any) -> Any:
    """Floating tensors (and floating dtype arguments) of a nested structure, in float64."""

    def convert(v: Any) -> Any:
        if floating(v):
            return v.detach().to(torch.float64)
        if isinstance(v, torch.dtype) and v.is_floating_point:
            return torch.float64
        return v

    return tree_map(convert, value)


@dataclass
class BoundCall:
    """A captured call with its floating tensor inputs exposed as a flat, replaceable list.

    ``tensors[i]`` is the i-th floating tensor input in schema order, ``names[i]`` the name of
    the argument it belongs to (``tensors``, say, for each element of ``cat``'s list).
    :meth:`function` returns ``f(*replacements) -> outputs`` calling the operator with those
    tensors substituted and every other argument as captured.
    """

    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    tensors: list[torch.Tensor]
    names: list[str]
    _leaves: list[Any]
    _spec: Any
    _slots: list[int]
    _written: set[int]
    # When set, the operator runs in this dtype inside a float64 shell: floating inputs are
    # cast down on the way in and the outputs back up, so finite differences and directions
    # stay in float64 while the kernel is the one that was captured (for kernels with no
    # float64 implementation, such as oneDNN's fused RNN layer).
    inner_dtype: torch.dtype | None = None

    @classmethod
    def of(cls, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> BoundCall:
        """Expose the floating tensors of ``func(*args, **kwargs)``."""
        leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
        arg_names = _leaf_argument_names(func, args, kwargs, len(leaves))
        written_names = _written_argument_names(func)
        slots = [i for i, leaf in enumerate(leaves) if floating(leaf)]
        written = {i for i, name in enumerate(arg_names) if name in written_names}
        return cls(
            func=func,
            args=tuple(args),
            kwargs=dict(kwargs),
            tensors=[leaves[i] for i in slots],
            names=[arg_names[i] for i in slots],
            _leaves=leaves,
            _spec=spec,
            _slots=slots,
            _written=written,
        )

    def function(self, use: Sequence[int]) -> Callable[..., list[torch.Tensor]]:
        """``f(*xs)``: the operator with floating inputs ``use[k]`` replaced by ``xs[k]``.

        Arguments the schema marks as written (in-place ops such as ``relu_``) are cloned
        first, so the operator never writes into a tensor autograd is differentiating.
        """
        positions = [self._slots[k] for k in use]
        places = _leaf_places(self.args, self.kwargs, len(self._leaves))

        def call(*xs: torch.Tensor) -> list[torch.Tensor]:
            leaves = list(self._leaves)
            for pos, x in zip(positions, xs, strict=True):
                leaves[pos] = x
            for pos in self._written:
                if isinstance(leaves[pos], torch.Tensor):
                    leaves[pos] = leaves[pos].clone()
            inner = self.inner_dtype
            if inner is not None:
                leaves = [leaf.to(inner) if floating(leaf) else leaf for leaf in leaves]
            if places is None or inner is not None:
                args, kwargs = tree_unflatten(leaves, self._spec)
            else:  # the same call, rebuilt without a pytree walk (see _leaf_places)
                args, kwargs = _rebuild(self.args, self.kwargs, places, leaves)
            out = self.func(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                tensors = [out]
            elif isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
                tensors = list(out)
            else:
                flat, _ = tree_flatten(out)
                tensors = [t for t in flat if isinstance(t, torch.Tensor)]
            if inner is not None:
                tensors = [t.to(torch.float64) if t.is_floating_point() else t for t in tensors]
            return tensors

        return call


# Where each pytree leaf of a call sits: (argument index or keyword, index in a list argument
# or None). Rebuilding a call from these is several times cheaper than ``tree_unflatten``,
# which the gradient checks would otherwise pay on every one of an operator's re-runs.
_Place = tuple[int | str, int | None]


def _leaf_places(args: Sequence[Any], kwargs: dict[str, Any], n_leaves: int) -> list[_Place] | None:
    """The place of every leaf, or None when an argument nests deeper than one list."""
    places: list[_Place] = []
    named: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
    for key, value in named:
        flat = tree_flatten(value)[0]
        if len(flat) == 1 and flat[0] is value:
            places.append((key, None))
        elif isinstance(value, (list, tuple)) and len(flat) == len(value):
            if any(a is not b for a, b in zip(flat, value, strict=True)):
                return None
            places.extend((key, j) for j in range(len(value)))
        else:
            return None
    return places if len(places) == n_leaves else None


def _rebuild(
    args: Sequence[Any], kwargs: dict[str, Any], places: list[_Place], leaves: list[Any]
) -> tuple[list[Any], dict[str, Any]]:
    """``args``/``kwargs`` with every leaf replaced by ``leaves`` (same order as the places)."""
    new_args = list(args)
    new_kwargs = dict(kwargs)
    lists: dict[int | str, list[Any]] = {}
    for (key, j), leaf in zip(places, leaves, strict=True):
        if j is None:
            if isinstance(key, int):
                new_args[key] = leaf
            else:
                new_kwargs[key] = leaf
            continue
        original = args[key] if isinstance(key, int) else kwargs[key]
        if key not in lists:
            if original[j] is leaf:
                continue  # an unchanged list stays the very object the call captured
            lists[key] = list(original)
        lists[key][j] = leaf
    for key, items in lists.items():
        original = args[key] if isinstance(key, int) else kwargs[key]
        value = tuple(items) if isinstance(original, tuple) else items
        if isinstance(key, int):
            new_args[key] = value
        else:
            new_kwargs[key] = value
    return new_args, new_kwargs


def _leaf_argument_names(
    func: Any, args: Sequence[Any], kwargs: dict[str, Any], n_leaves: int
) -> list[str]:
    schema = getattr(func, "_schema", None)
    names: list[str] = []
    for i, value in enumerate(args):
        name = f"arg{i}"
        if schema is not None and i < len(schema.arguments):
            name = schema.arguments[i].name
        names.extend([name] * len(tree_flatten(value)[0]))
    for key, value in kwargs.items():
        names.extend([key] * len(tree_flatten(value)[0]))
    return names if len(names) == n_leaves else [f"leaf{i}" for i in range(n_leaves)]


def _written_argument_names(func: Any) -> set[str]:
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return set()
    return {
        arg.name
        for arg in schema.arguments
        if arg.alias_info is not None and arg.alias_info.is_write
    }
