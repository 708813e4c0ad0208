"""Reading and rebuilding the arguments of one captured ATen call (an :class:`OpRecord`).

The gradient checks re-run a captured operator alone: in float64 for finite differences, with
a few inputs replaced (sliced, nudged off a kink). These helpers name each argument by the
operator's schema, so checks can say "not differentiable with respect to ``running_mean``"
and detectors can read ``kernel_size`` without guessing positions.
"""

from __future__ import annotations

import functools
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
    return _convert64(value)


def _convert64(v: Any) -> Any:
    # By hand for the plain containers of ATen arguments (lists, tuples, dicts): the gradient
    # checks convert every captured call, and a pytree walk costs more than the operator.
    kind = type(v)
    if kind is list or kind is tuple:
        return kind(_convert64(x) for x in v)
    if kind is dict:
        return {k: _convert64(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, dict)):  # a namedtuple, torch.Size, ...: as pytree sees it
        return tree_map(_convert_leaf, v)
    return _convert_leaf(v)


def _convert_leaf(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().to(torch.float64) if v.is_floating_point() else v
    if isinstance(v, torch.dtype):
        return torch.float64 if v.is_floating_point else v
    return v


# Where each pytree leaf of a call sits: (argument index or keyword, index in a list argument
# or None). Rebuilding a call from these is several times cheaper than ``tree_unflatten``,
# which the gradient checks would otherwise pay on every one of an operator's re-runs.
_Place = tuple[int | str, int | None]


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
    # Where each leaf sits (see _flat_leaves), or None for arguments nested deeper, which are
    # rebuilt from the pytree spec instead.
    _places: list[_Place] | None
    # When set, the operator runs in this dtype inside a float64 shell: floating inputs are
    # cast down on the way in and the outputs back up, so finite differences and directions
    # stay in float64 while the kernel is the one that was captured (for kernels with no
    # float64 implementation, such as oneDNN's fused RNN layer).
    inner_dtype: torch.dtype | None = None

    @classmethod
    def of(cls, func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> BoundCall:
        """Expose the floating tensors of ``func(*args, **kwargs)``."""
        args, kwargs = tuple(args), dict(kwargs)
        flat = _flat_leaves(args, kwargs)
        if flat is not None:
            leaves, places = flat
            spec = None
        else:
            leaves, spec = tree_flatten((args, kwargs))
            places = None
        arg_names = _leaf_argument_names(func, args, kwargs, len(leaves), places)
        written_names = _written_argument_names(func)
        slots = [i for i, leaf in enumerate(leaves) if floating(leaf)]
        written = {i for i, name in enumerate(arg_names) if name in written_names}
        return cls(
            func=func,
            args=args,
            kwargs=kwargs,
            tensors=[leaves[i] for i in slots],
            names=[arg_names[i] for i in slots],
            _leaves=leaves,
            _spec=spec,
            _slots=slots,
            _written=written,
            _places=places,
        )

    def function(self, use: Sequence[int]) -> Callable[..., list[torch.Tensor]]:
        """``f(*xs)``: the operator with floating inputs ``use[k]`` replaced by ``xs[k]``.

        Arguments the schema marks as written (in-place ops such as ``relu_``) are cloned
        first, so the operator never writes into a tensor autograd is differentiating.
        """
        positions = [self._slots[k] for k in use]
        places = self._places
        if (
            places is not None
            and not self._written
            and self.inner_dtype is None
            and all(places[p][1] is None and isinstance(places[p][0], int) for p in positions)
        ):
            return _positional_call(self.func, self.args, self.kwargs, places, positions)

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
            if places is None:
                args, kwargs = tree_unflatten(leaves, self._spec)
            else:  # the same call, rebuilt without a pytree walk (see _flat_leaves)
                args, kwargs = _rebuild(self.args, self.kwargs, places, leaves)
            tensors = _output_tensors(self.func(*args, **kwargs))
            if inner is not None:
                tensors = [t.to(torch.float64) if t.is_floating_point() else t for t in tensors]
            return tensors

        return call


def _positional_call(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    places: list[_Place],
    positions: list[int],
) -> Callable[..., list[torch.Tensor]]:
    """:meth:`BoundCall.function` when every replaced tensor is a positional argument of its
    own and nothing is written or cast: a copy of the argument list with those entries
    replaced (the finite differences call it a dozen times per operator)."""
    slots = [int(places[p][0]) for p in positions]
    template = list(args)

    def call(*xs: torch.Tensor) -> list[torch.Tensor]:
        new_args = template.copy()
        for slot, x in zip(slots, xs, strict=True):
            new_args[slot] = x
        out = func(*new_args, **kwargs)
        return _output_tensors(out)

    return call


def _output_tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    flat, _ = tree_flatten(out)
    return [t for t in flat if isinstance(t, torch.Tensor)]


def _flat_leaves(
    args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], list[_Place]] | None:
    """The pytree leaves of a call and the place of each, or None when an argument nests
    deeper than one plain list or tuple (the caller then walks the pytree)."""
    leaves: list[Any] = []
    places: list[_Place] = []
    named: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
    for key, value in named:
        kind = type(value)
        if kind is list or kind is tuple:
            for j, item in enumerate(value):
                if isinstance(item, (list, tuple, dict)):
                    return None
                leaves.append(item)
                places.append((key, j))
        elif isinstance(value, (list, tuple, dict)):  # a namedtuple, a dict: not flat
            return None
        else:
            leaves.append(value)
            places.append((key, None))
    return leaves, places


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
    func: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    n_leaves: int,
    places: list[_Place] | None = None,
) -> list[str]:
    schema_names = _schema_argument_names(func)

    def name_of(key: int | str) -> str:
        if isinstance(key, str):
            return key
        return schema_names[key] if key < len(schema_names) else f"arg{key}"

    if places is not None:
        return [name_of(key) for key, _ in places]
    names: list[str] = []
    for i, value in enumerate(args):
        names.extend([name_of(i)] * len(tree_flatten(value)[0]))
    for key, value in kwargs.items():
        names.extend([key] * len(tree_flatten(value)[0]))
    return names if len(names) == n_leaves else [f"leaf{i}" for i in range(n_leaves)]


def _schema_argument_names(func: Any) -> tuple[str, ...]:
    """The names of the schema's arguments in order (``schema.arguments`` builds a new list of
    argument objects on every access: read once per operator)."""
    try:
        return _names_by_schema(func)
    except TypeError:  # an unhashable callable: no schema
        return ()


@functools.lru_cache(maxsize=1024)
def _names_by_schema(func: Any) -> tuple[str, ...]:
    schema = getattr(func, "_schema", None)
    return () if schema is None else tuple(str(arg.name) for arg in schema.arguments)


def _written_argument_names(func: Any) -> frozenset[str]:
    try:
        return _written_by_schema(func)
    except TypeError:  # an unhashable callable: not an ATen operator, nothing written
        return frozenset()


@functools.lru_cache(maxsize=1024)
def _written_by_schema(func: Any) -> frozenset[str]:
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return frozenset()
    return frozenset(
        arg.name
        for arg in schema.arguments
        if arg.alias_info is not None and arg.alias_info.is_write
    )
