"""Snapshots of the state a model, an optimizer or a loss scaler holds, and their differences.

Why: ``Module.state_dict()`` saves parameters and persistent buffers only, and
``Optimizer.state_dict()`` only ``state`` and ``param_groups``; what else a model or optimizer
keeps (a tensor assigned as a plain attribute, a non-persistent buffer, a counter, a
``torch.Generator``, a custom optimizer's dict of momentum buffers) silently starts over on
resume. No PyTorch API lists that state, so it is found by walking ``__dict__`` (hand-written):
``resume`` diffs the uninterrupted objects against the resumed ones at the save point,
``recompute`` a model before and after its backward pass. A snapshot maps a path
(``optimizer.momentum_buf[param 0 (fc.weight)]``) to an :class:`Entry`: a tensor copy, a
number, or a container's type and length (so a dict that lost its entries differs itself).
:class:`StepObserver` watches a training step's ATen calls (random draws, state writes) for
``recompute``; :mod:`attest.collection.training.tensor_compare` compares parameters or
gradients for both checks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from attest.collection.capture.tensors import tensor_storage
from attest.collection.profile.op_metrics import bits_equal, relative_deviation
from attest.evidence.model import CheckItem, Subject

__all__ = [
    "Difference",
    "Entry",
    "RandomCall",
    "StepObserver",
    "add_storages",
    "diff_snapshots",
    "model_snapshot",
    "object_snapshot",
    "optimizer_snapshot",
    "parameter_labels",
    "random_items",
    "random_verdicts",
    "state_paths",
    "storage_key",
    "write_items",
    "writes_again",
]

# What every nn.Module and every optimizer keeps in its __dict__ (hooks, registries): never
# user state. Taken from live instances so that a new PyTorch release's additions are known.
_MODULE_INTERNALS = frozenset(nn.Module().__dict__)
_OPTIMIZER_INTERNALS = frozenset(
    torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1).__dict__
) | {"state", "param_groups", "defaults"}
_MAX_DEPTH = 4  # containers nested deeper than this are described, not walked
_MAX_ITEMS = 256  # elements of one container walked; its length is always recorded
_SCALARS = (bool, int, float, complex, str, type(None))


@dataclass
class Entry:
    """One piece of state: ``kind`` says where it lives (``plain attribute``, ``buffer``,
    ``non-persistent buffer``, ``optimizer attribute``...); ``owner`` is the module name or
    the object (``optimizer``, ``grad_scaler``); ``attribute`` its top-level attribute."""

    kind: str
    owner: str
    attribute: str
    value: Any  # a detached tensor copy, a scalar, or a description of a container


@dataclass
class Difference:
    """A path whose value differs between two snapshots (or exists in only one)."""

    path: str
    kind: str
    owner: str
    attribute: str
    before: str  # the first snapshot's value, described
    after: str  # the second's
    deviation: float | None = None  # max relative deviation for tensors of equal shape


def parameter_labels(
    model: nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> dict[int, str]:
    """``id(parameter)`` -> ``param i (name)``: the same label for the i-th optimized parameter
    of two separate object graphs (the optimizer's parameter order, else the model's)."""
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    ordered: list[Any] = (
        [p for group in optimizer.param_groups for p in group["params"]]
        if optimizer is not None
        else [p for _, p in model.named_parameters()]
    )
    return {id(p): f"param {i} ({names.get(id(p), '?')})" for i, p in enumerate(ordered)}


def model_snapshot(model: nn.Module) -> dict[str, Entry]:
    """Every module's state: parameters, buffers and the tensors, numbers, generators and
    containers kept as plain attributes in its ``__dict__``."""
    out: dict[str, Entry] = {}
    for name, module in model.named_modules(remove_duplicate=True):
        owner = name or "<root>"
        prefix = f"{name}." if name else ""
        for pname, param in module._parameters.items():
            if param is not None:
                out[f"{prefix}{pname}"] = Entry("parameter", owner, pname, _copy(param))
        non_persistent = module._non_persistent_buffers_set
        for bname, buf in module._buffers.items():
            if buf is None:
                continue
            kind = "non-persistent buffer" if bname in non_persistent else "buffer"
            out[f"{prefix}{bname}"] = Entry(kind, owner, bname, _copy(buf))
        for attr, value in module.__dict__.items():
            if attr not in _MODULE_INTERNALS:
                _walk(value, f"{prefix}{attr}", Entry("plain attribute", owner, attr, None), out)
    return out


def optimizer_snapshot(
    optimizer: torch.optim.Optimizer, labels: Mapping[int, str]
) -> dict[str, Entry]:
    """The optimizer's per-parameter ``state``, its groups' hyperparameters and every other
    attribute (where a custom optimizer may keep state that ``state_dict()`` omits);
    parameters as keys are written with ``labels``."""
    out: dict[str, Entry] = {}
    for param, state in optimizer.state.items():
        label = labels.get(id(param), "param ?")
        template = Entry("optimizer state", "optimizer", "state", None)
        _walk(state, f"optimizer.state[{label}]", template, out, labels=labels)
    for i, group in enumerate(optimizer.param_groups):
        for key, value in group.items():
            if key != "params":
                template = Entry("optimizer param_group", "optimizer", "param_groups", None)
                _walk(value, f"optimizer.param_groups[{i}].{key}", template, out)
    for attr, value in optimizer.__dict__.items():
        if attr not in _OPTIMIZER_INTERNALS:
            template = Entry("optimizer attribute", "optimizer", attr, None)
            _walk(value, f"optimizer.{attr}", template, out, labels=labels)
    return out


def object_snapshot(
    obj: object,
    owner: str,
    *,
    kind: str = "attribute",
    skip: Iterable[str] = (),
) -> dict[str, Entry]:
    """Every attribute of ``obj`` (or every key, for a mapping such as a ``state_dict()``)
    but those in ``skip``."""
    out: dict[str, Entry] = {}
    skipped = set(skip)
    members = obj.items() if isinstance(obj, Mapping) else vars(obj).items()
    for attr, value in members:
        if attr not in skipped:
            template = Entry(kind, owner, str(attr), None)
            _walk(value, f"{owner}.{attr}", template, out)
    return out


def _copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


def _walk(
    value: Any,
    path: str,
    template: Entry,
    out: dict[str, Entry],
    *,
    labels: Mapping[int, str] | None = None,
    depth: int = 0,
    seen: set[int] | None = None,
) -> None:
    """Record ``value`` at ``path`` and, for containers and plain objects, what they hold."""
    seen = set() if seen is None else seen

    def put(v: Any, kind: str | None = None) -> None:
        out[path] = Entry(kind or template.kind, template.owner, template.attribute, v)

    if isinstance(value, torch.Tensor):
        put(_copy(value))
    elif isinstance(value, torch.Generator):
        put(value.get_state(), f"{template.kind} (a torch.Generator)")
    elif isinstance(value, _SCALARS):
        put(value)
    elif isinstance(value, nn.Module) or callable(value) or id(value) in seen:
        return  # submodules are walked on their own; functions and cycles hold no state
    elif isinstance(value, Mapping | list | tuple | set | frozenset) or hasattr(value, "__dict__"):
        seen.add(id(value))
        children = _children(value, labels)
        put(f"{type(value).__name__} of {len(children)}")
        if depth >= _MAX_DEPTH:
            return
        for key, child in children[:_MAX_ITEMS]:
            _walk(child, f"{path}{key}", template, out, labels=labels, depth=depth + 1, seen=seen)
    else:
        put(f"<{type(value).__name__}>")  # compared by type only


def _children(value: Any, labels: Mapping[int, str] | None) -> list[tuple[str, Any]]:
    """A container's elements as (path suffix, value), in a stable order."""
    if isinstance(value, Mapping):
        keyed = [(_key(k, labels), v) for k, v in value.items()]
        return [(f"[{k}]", v) for k, v in sorted(keyed, key=lambda kv: kv[0])]
    if isinstance(value, list | tuple):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, set | frozenset):
        return [(f"{{{i}}}", v) for i, v in enumerate(sorted(value, key=repr))]
    return [(f".{k}", v) for k, v in sorted(vars(value).items())]


def _key(key: Any, labels: Mapping[int, str] | None) -> str:
    """A mapping key, written the same way in two object graphs: parameters (and other
    tensors) by their label, not by their identity."""
    if isinstance(key, torch.Tensor):
        return (labels or {}).get(id(key), f"tensor {tuple(key.shape)}")
    return repr(key)


def diff_snapshots(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> list[Difference]:
    """The paths whose entries differ; below a container whose description (type, length)
    already differs, only the container is reported."""
    differences: list[Difference] = []
    reported: list[str] = []
    for path in sorted(set(before) | set(after)):
        if any(
            path.startswith(p) and path[len(p) : len(p) + 1] in ("[", ".", "{") for p in reported
        ):
            continue
        a, b = before.get(path), after.get(path)
        if a is not None and b is not None and _same(a.value, b.value):
            continue
        ref = a or b
        assert ref is not None
        va, vb = (a.value if a else None), (b.value if b else None)
        deviation = None
        if isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor):
            deviation = relative_deviation(vb, va.to(vb.device))
        differences.append(
            Difference(
                path, ref.kind, ref.owner, ref.attribute, _describe(a), _describe(b), deviation
            )
        )
        reported.append(path)
    return differences


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bits_equal(a, b)
        )
    return type(a) is type(b) and bool(a == b)


def _describe(entry: Entry | None) -> str:
    if entry is None:
        return "absent"
    value = entry.value
    if isinstance(value, torch.Tensor):
        if value.numel() <= 4:
            return f"tensor {value.tolist()}"
        data = value.detach().to(torch.float64) if value.is_floating_point() else None
        norm = f", norm {float(data.norm()):.4g}" if data is not None else ""
        return f"tensor of shape {tuple(value.shape)}{norm}"
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def storage_key(t: torch.Tensor) -> tuple[int, int]:
    """(address, bytes) of a tensor's storage; (0, bytes) where it has none (sparse...)."""
    storage = tensor_storage(t)
    if storage is None:
        return 0, t.numel() * t.element_size()
    return storage.data_ptr(), storage.nbytes()


def add_storages(target: dict[int, int], args: Any, excluded: set[int]) -> None:
    """Note the storages of every tensor in ``args`` (a pytree) but the ``excluded`` ones."""
    for leaf in tree_leaves(args):
        if isinstance(leaf, torch.Tensor):
            key, nbytes = storage_key(leaf)
            if key and key not in excluded:
                target[key] = nbytes


def state_paths(model: nn.Module) -> dict[int, str]:
    """Storage address -> ``module.attribute`` of every buffer and plain tensor attribute."""
    paths: dict[int, str] = {}
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        owned = {**module._buffers, **{k: v for k, v in vars(module).items() if k[:1] != "_"}}
        for attr, value in owned.items():
            if isinstance(value, torch.Tensor) and value.numel():
                paths.setdefault(storage_key(value)[0], f"{prefix}{attr}")
    return paths


@dataclass
class RandomCall:
    """A random operator's call (``Tag.nondeterministic_seeded``) and its outputs."""

    phase: str
    region: str | None
    module: str
    op: str
    outputs: list[torch.Tensor] = field(default_factory=list)


class StepObserver(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Every ATen call of a step: random operators (``Tag.nondeterministic_seeded``) with
    their outputs, and calls that change the state at ``paths``, compared by bits before and
    after (``native_batch_norm`` writes the running statistics without declaring it in its
    schema, so the schema's write annotations alone would miss BatchNorm). ``where()`` says
    (phase, region, module) at the time of the call."""

    def __init__(
        self, paths: dict[int, str], where: Callable[[], tuple[str, str | None, str]]
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.paths, self.where = paths, where
        self.random: list[RandomCall] = []
        self.writes: list[tuple[str, str | None, str, str]] = []  # phase, region, path, op

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        watched = []
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, torch.Tensor) and leaf.numel():
                path = self.paths.get(storage_key(leaf)[0])
                if path is not None:
                    watched.append((path, leaf, leaf.detach().clone()))
        out = func(*args, **kwargs)
        phase, region, module = self.where()
        for path, tensor, before in watched:
            if not bits_equal(tensor, before):
                self.writes.append((phase, region, path, str(func)))
        if torch.Tag.nondeterministic_seeded in func.tags:
            outputs = [t.detach().clone() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            self.random.append(RandomCall(phase, region, module, str(func), outputs))
        return out


def random_verdicts(calls: list[RandomCall]) -> dict[tuple[str | None, str, str], bool]:
    """(region, module, op) -> whether every call of that random operator in the backward
    pass (a recomputation) gave the bits of its forward call (the k-th against the k-th);
    only recomputed keys have a verdict."""
    forward: dict[tuple[str | None, str, str], list[RandomCall]] = defaultdict(list)
    verdicts: dict[tuple[str | None, str, str], bool] = {}
    seen: dict[tuple[str | None, str, str], int] = defaultdict(int)
    for call in calls:
        key = (call.region, call.module, call.op)
        if call.phase == "forward":
            forward[key].append(call)
            continue
        index, seen[key] = seen[key], seen[key] + 1
        original = forward[key][index] if index < len(forward[key]) else None
        same = original is not None and all(
            a.shape == b.shape and bits_equal(a, b)
            for a, b in zip(call.outputs, original.outputs, strict=False)
        )
        verdicts[key] = verdicts.get(key, True) and same
    return verdicts


def writes_again(
    writes: list[tuple[str, str | None, str, str]], changes: list[Difference]
) -> dict[str, dict[str, Any]]:
    """Module state written during the backward pass (a recomputation): path -> region,
    operators, and how often it was written in the forward and in the backward pass; also
    the state ``changes`` between before and after the backward pass that no operator shows
    (assignments in Python)."""
    found: dict[str, dict[str, Any]] = {}
    for phase, region, path, op in writes:
        if phase == "backward":
            entry = found.setdefault(path, {"region": region, "ops": [], "forward": 0, "again": 0})
            entry["ops"] += [op] if op not in entry["ops"] else []
            entry["again"] += 1
    for phase, _, path, _ in writes:
        if phase == "forward" and path in found:
            found[path]["forward"] += 1
    for change in changes:
        if change.kind != "parameter" and change.path not in found:
            op = f"an assignment ({change.before} -> {change.after})"
            found[change.path] = {"region": None, "ops": [op], "forward": None, "again": 1}
    return found


def random_items(verdicts: dict[tuple[str | None, str, str], bool]) -> list[CheckItem]:
    """One item per recomputed random operator: pass when it drew the same numbers."""
    items = []
    for (key, module, op), ok in verdicts.items():
        where = f"region {key}" if key else "a recomputation outside torch.utils.checkpoint"
        what = "the same random numbers" if ok else "other random numbers: the RNG state was "
        what += "" if ok else "not restored (preserve_rng_state=True, or restore it by hand)"
        items.append(
            CheckItem(
                subject=Subject(kind="operator", op=op, module=module),
                status="pass" if ok else "fail",
                metrics={"region": key, "rng_restored": ok},
                message=f"random operator {op} @ {module or '<root>'} in {where}: "
                f"recomputed with {what}",
            )
        )
    return items


def write_items(writes: dict[str, dict[str, Any]]) -> list[CheckItem]:
    """One failing item per piece of state written again during recomputation."""
    items = []
    for path, entry in writes.items():
        module, _, attribute = path.rpartition(".")
        ops = ", ".join(entry["ops"])
        first = f"{entry['forward']} time(s) in the forward pass and " if entry["forward"] else ""
        items.append(
            CheckItem(
                subject=Subject(kind="module", module=module, name=attribute),
                status="fail",
                metrics={
                    "writes_forward": entry["forward"],
                    "writes_recompute": entry["again"],
                    "region": entry["region"],
                    "operator": ops,
                },
                message=f"{attribute} of module {module or '<root>'} is written {first}again "
                f"{entry['again']} time(s) during recomputation (by {ops}): updated twice per "
                "step. Keep such modules (BatchNorm in training mode) out of checkpointed "
                "regions, or make their update idempotent.",
            )
        )
    return items
