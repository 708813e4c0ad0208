"""How the model is called with named inputs, and what F is read from its output.

Every check differentiates one tensor ``x`` and calls ``model(x)``; :class:`ModelCall` makes a
model with named inputs (``inputs:`` with roles, docs/spec.md) answer that call, so that every
check, the capture, IG and the training checks take named inputs without knowing of them:

- ``x`` holds the *differentiated* inputs: ``role: attributed`` tensors and, for
  ``role: embedded`` token ids, the output of the embedding module (the ids' embeddings),
  each flattened per example and packed side by side (a lone attributed input keeps its
  shape). When the model also takes inputs that are not differentiated (``role: fixed``, the
  ids themselves) or F needs the probe's rows (a target function, heads), ``x`` ends with one
  more column: the probe row each example comes from. Its gradient is zero (it is read
  detached), a finite-difference step never moves it to another row (it is rounded), and
  slicing, repeating or interpolating ``x`` (IG paths, sub-batches, the batch sizes of
  ``batch_invariance``) carries it along, so the fixed inputs always match their example.
- The model's ``forward`` is replaced on each instance (no wrapper module: parameter and
  module names stay the user's) by one that unpacks ``x``, passes attributed parts as they
  are, fixed ones unchanged (integer tensors are never cast or perturbed; floating ones take
  ``x``'s dtype), calls the model's own ``forward`` with the ids, and replaces the embedding
  module's output with the embeddings from ``x`` (a forward hook), so the gradient is taken
  with respect to the embeddings.
- The output is the one ``output:`` selects (a key, an index or a dotted path through dicts,
  tuples and ``ModelOutput``), else the first tensor. With ``heads:`` or a target function F
  is computed inside: the output is ``[F | each head flattened]`` and the spec's target is
  column 0 (:attr:`ModelCall.computes_f`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from attest.spec.embedding_bag import pool_hook

__all__ = ["Head", "InputPart", "ModelCall", "class_scalar", "labels_like", "select_output"]


def labels_like(labels: Any, output: torch.Tensor) -> Any:
    """Float targets (regression, multi-label, soft labels and masks) in the output's dtype and
    device, as a loss needs them (a float64 check's output with float32 targets makes
    ``mse_loss`` and ``binary_cross_entropy_with_logits`` raise); integer labels unchanged."""
    if isinstance(labels, torch.Tensor) and labels.is_floating_point():
        return labels.to(device=output.device, dtype=output.dtype)
    return labels


def class_scalar(
    output: torch.Tensor, target: int | str, labels: torch.Tensor | None
) -> torch.Tensor:
    """F per example, shape (N,): ``output[:, k]`` summed over any further dims, where k is an
    int class, each example's label (``label``) or its argmax; an output without a class dim
    is summed."""
    if output.dim() < 2:
        return output.reshape(output.shape[0], -1).sum(dim=1)
    n, c = output.shape[0], output.shape[1]
    if isinstance(target, int):
        k = torch.full((n,), target, dtype=torch.long, device=output.device)
    elif target == "label":
        if labels is None:
            raise ValueError("target: label needs a 'target' tensor in the probe inputs")
        k = labels.to(device=output.device, dtype=torch.long).reshape(n)
    else:
        k = output.detach().reshape(n, c, -1).sum(dim=2).argmax(dim=1)
    flat = output.reshape(n, c, -1)
    picked = flat.gather(1, k.view(n, 1, 1).expand(n, 1, flat.shape[2]))
    return picked.reshape(n, -1).sum(dim=1)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def select_output(output: Any, path: Sequence[str] | None) -> torch.Tensor:
    """The tensor at ``path`` in the model's output (a dict key, an attribute of a
    ``ModelOutput``, a tuple index); no path: the tensor itself, ``out``/``logits`` of a
    mapping, else the first tensor. A ValueError names the path and what was there."""
    if path is None:
        if isinstance(output, torch.Tensor):
            return output
        if isinstance(output, Mapping):
            for key in ("out", "logits"):
                if isinstance(output.get(key), torch.Tensor):
                    return output[key]  # type: ignore[no-any-return]
        found = _tensors(output)
        if not found:
            raise TypeError(f"the model returned {type(output).__name__} holding no tensor")
        return found[0]
    value = output
    for depth, part in enumerate(path):
        where = ".".join(path[: depth + 1])
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, (tuple, list)) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif not part.isdigit() and hasattr(value, part) and not isinstance(value, torch.Tensor):
            value = getattr(value, part)
        else:
            keys = list(value.keys()) if isinstance(value, Mapping) else None
            have = f"keys {keys}" if keys is not None else type(value).__name__
            if isinstance(value, (tuple, list)):
                have = f"a {type(value).__name__} of {len(value)}"
            raise ValueError(f"output path {'.'.join(path)!r}: no {where!r} in {have}")
    if not isinstance(value, torch.Tensor):
        raise ValueError(
            f"output path {'.'.join(path)!r} is a {type(value).__name__}, not a tensor"
        )
    return value


@dataclass
class InputPart:
    """One named model argument and, when it is differentiated, where it sits in ``x``."""

    name: str
    key: str  # the probe tensor's key
    role: str  # attributed | embedded | fixed
    arg: int | None
    kwarg: str | None
    embedding: str | None = None
    # zero | mean | blur | uniform; an embedded input's zero, or pad / token: integrated from
    # its reference-token sequence's embeddings (attest.spec.reference_tokens)
    baseline: str = "zero"
    shape: tuple[int, ...] = ()  # per example, of the part in x (embedded: the embeddings)
    offset: int = 0  # its first column in packed x
    # an embedded input's reference-token sequence: its rule (token, keep, where each came
    # from) and its embeddings per probe example (N, *shape), from the embedding module at
    # load; set for baseline pad / token, and for zero where pad's rule resolves (compared)
    reference_rule: dict[str, Any] | None = None
    reference: torch.Tensor | None = None

    @property
    def size(self) -> int:
        return int(torch.Size(self.shape).numel())


@dataclass
class Head:
    """One of ``heads:`` (or the single output of a target function)."""

    name: str
    path: list[str] | None
    target: int | str
    target_fn: Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor] | None = None
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    labels: str | None = None  # the probe key of its targets
    shape: tuple[int, ...] | None = None  # per example, learned at the first call
    # ``target: argmax``: each probe example's predicted class at its input, fixed at load so
    # that F reads the same class all along an IG path (as IG's classes for one output)
    classes: torch.Tensor | None = None


def _replace_embedding(module: nn.Module, _args: Any, output: Any) -> Any:
    """Forward hook of an embedded input's embedding module: its output replaced by the
    embeddings being differentiated (set for the duration of one call)."""
    replacement = module.__dict__.get("_attest_embeddings")
    return output if replacement is None else replacement


def _attested_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    call: ModelCall = self.__dict__["_attest_call"]
    return call.forward(self, x)


@dataclass
class ModelCall:
    """The named inputs, the output selection and F of a spec (module docstring)."""

    parts: list[InputPart]  # every named input, differentiated ones in packing order
    probe: dict[str, torch.Tensor]  # every probe tensor, as stored (CPU)
    output: list[str] | None = None
    heads: list[Head] = field(default_factory=list)
    rows: bool = False  # x ends with the row column
    flat: bool = True  # x is packed flat (False: a lone attributed input, its own shape)
    last_rows: torch.Tensor | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ModelCall:
        return self  # shared by every instance: it holds no module state

    # -- x ----------------------------------------------------------------------------------

    @property
    def differentiated(self) -> list[InputPart]:
        return [p for p in self.parts if p.role != "fixed"]

    @property
    def computes_f(self) -> bool:
        """Output is ``[F | heads flattened]`` and the spec's target is column 0."""
        return bool(self.heads)

    @property
    def n(self) -> int:
        return int(self.probe[self.parts[0].key].shape[0])

    def pack(
        self, values: dict[str, torch.Tensor], rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``x`` from each differentiated part (N, *shape) and the row numbers (N,)."""
        parts = self.differentiated
        if not self.flat:
            return values[parts[0].name]
        first = values[parts[0].name]
        n = first.shape[0]
        columns = [values[p.name].reshape(n, -1) for p in parts]
        if self.rows:
            if rows is None:
                rows = torch.arange(n)
            columns.append(rows.to(device=first.device, dtype=first.dtype).reshape(n, 1))
        return torch.cat(columns, dim=1)

    def unpack(self, x: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Each differentiated part of ``x`` (k, *shape) and the probe rows (k,) or None."""
        parts = self.differentiated
        if not self.flat:
            return {parts[0].name: x}, None
        k = x.shape[0]
        values = {p.name: x[:, p.offset : p.offset + p.size].reshape(k, *p.shape) for p in parts}
        rows = None
        if self.rows:
            # Reading the row numbers is bookkeeping, not the model: kept out of any operator
            # capture (a TorchDispatchMode such as the profiler's), whose operators must be
            # the model's own.
            with _disable_current_modes():
                rows = x[:, -1].detach().round().to(torch.long).cpu()
                stray = bool(((rows < 0) | (rows >= self.n)).any())
            if stray:
                raise ValueError(
                    "the row column of the packed probe inputs names no probe example "
                    "(was x sliced across its columns?)"
                )
        return values, rows

    def parts_of(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.unpack(x)[0]

    def batch(self, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """The probe's per-example tensors (first dim N) at ``rows``: the ``batch`` a target
        function receives."""
        n = self.n
        return {
            key: tensor[rows]
            for key, tensor in self.probe.items()
            if tensor.dim() and tensor.shape[0] == n
        }

    def describe(self) -> dict[str, Any]:
        """What the evidence records of the call (``model.call``): each named input (its probe
        key, role, place, stored dtype and shape per example), the output path and heads,
        and how x is packed."""
        return {
            "inputs": [
                {
                    "name": p.name,
                    "key": p.key,
                    "role": p.role,
                    "arg": p.arg,
                    "kwarg": p.kwarg,
                    "embedding": p.embedding,
                    "baseline": None if p.role == "fixed" else p.baseline,
                    **({"reference_token": p.reference_rule} if p.reference_rule else {}),
                    "dtype": str(self.probe[p.key].dtype).removeprefix("torch."),
                    "shape": list(self.probe[p.key].shape[1:]),
                }
                for p in self.parts
            ],
            "output": None if self.output is None else ".".join(self.output),
            "heads": [
                {
                    "name": h.name,
                    "output": None if h.path is None else ".".join(h.path),
                    "target": h.target,
                    "loss": h.loss_fn is not None,
                    "labels": h.labels,
                }
                for h in self.heads
            ],
            "packed": {"flat": self.flat, "row_column": self.rows},
        }

    # -- calling ----------------------------------------------------------------------------

    def install(self, model: nn.Module) -> nn.Module:
        """``model`` answering ``model(x)``: its forward replaced on this instance and a hook
        on each embedding module (both survive ``copy.deepcopy``)."""
        model.__dict__["_attest_call"] = self
        model.__dict__["_attest_forward"] = type(model).forward
        model.forward = _attested_forward.__get__(model)
        for part in self.parts:
            if part.role == "embedded":
                assert part.embedding is not None
                module = model.get_submodule(part.embedding)
                if isinstance(module, nn.EmbeddingBag):  # per-token embeddings, then its pooling
                    module.register_forward_hook(pool_hook, with_kwargs=True)
                else:
                    module.register_forward_hook(_replace_embedding)
        return model

    def arguments(
        self, model: nn.Module, x: torch.Tensor
    ) -> tuple[list[Any], dict[str, Any], dict[str, torch.Tensor]]:
        """The model's positional and keyword arguments for ``x``, and the embeddings to put in
        place of each embedding module's output (by module path)."""
        values, rows = self.unpack(x)
        self.last_rows = rows
        args: dict[int, Any] = {}
        kwargs: dict[str, Any] = {}
        embeddings: dict[str, torch.Tensor] = {}
        for part in self.parts:
            if part.role == "attributed":
                value: Any = values[part.name]
            else:
                assert rows is not None
                with _disable_current_modes():  # the probe's tensors, not the model's work
                    value = self.probe[part.key][rows].to(x.device)
                    if part.role == "fixed" and value.is_floating_point():
                        value = value.to(x.dtype)
                if part.role == "embedded":
                    assert part.embedding is not None
                    embeddings[part.embedding] = values[part.name]
            if part.arg is not None:
                args[part.arg] = value
            else:
                assert part.kwarg is not None
                kwargs[part.kwarg] = value
        return [args[i] for i in sorted(args)], kwargs, embeddings

    def raw_output(self, model: nn.Module, x: torch.Tensor) -> Any:
        """The model's own output for ``x`` (a tensor, tuple, dict or ``ModelOutput``)."""
        args, kwargs, embeddings = self.arguments(model, x)
        modules = {path: model.get_submodule(path) for path in embeddings}
        for path, module in modules.items():
            module.__dict__["_attest_embeddings"] = embeddings[path]
        try:
            return model.__dict__["_attest_forward"](model, *args, **kwargs)
        finally:
            for module in modules.values():
                module.__dict__.pop("_attest_embeddings", None)

    def forward(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        raw = self.raw_output(model, x)
        if not self.computes_f:
            return select_output(raw, self.output)
        rows = self.last_rows
        assert rows is not None
        flats, total = [], None
        for head in self.heads:
            out = select_output(raw, head.path)
            head.shape = tuple(out.shape[1:])
            f = self._head_f(head, out, rows)
            total = f if total is None else total + f
            flats.append(out.reshape(out.shape[0], -1))
        assert total is not None
        return torch.cat([total.reshape(-1, 1).to(flats[0].dtype), *flats], dim=1)

    def selected(self, raw: Any) -> list[torch.Tensor]:
        """The output tensors F or a loss reads."""
        if self.heads:
            return [select_output(raw, h.path) for h in self.heads]
        return [select_output(raw, self.output)]

    # -- F and the loss with heads ----------------------------------------------------------

    def _head_labels(self, head: Head, rows: torch.Tensor, device: torch.device) -> Any:
        if head.labels is None:
            return None
        with _disable_current_modes():
            return self.probe[head.labels][rows].to(device)

    def _head_f(self, head: Head, out: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if head.target_fn is not None:
            with _disable_current_modes():
                batch = {k: v.to(out.device) for k, v in self.batch(rows).items()}
            f = head.target_fn(out, batch)
            if not isinstance(f, torch.Tensor) or f.numel() != out.shape[0]:
                raise ValueError(
                    f"target function of {head.name!r} must return one value per example "
                    f"({out.shape[0]}), got {getattr(f, 'shape', type(f).__name__)}"
                )
            return f.reshape(-1)
        if head.target == "argmax" and head.classes is not None:
            return class_scalar(out, "label", head.classes[rows])
        return class_scalar(out, head.target, self._head_labels(head, rows, out.device))

    def head_value(self, head: Head, out: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``head``'s F per example (k,) from its output ``out`` at probe ``rows``."""
        return self._head_f(head, out, rows)

    def head_classes(self, head: Head, rows: torch.Tensor) -> torch.Tensor | None:
        """The class each example's F reads in ``head`` (None: a target function's F)."""
        if head.target_fn is not None:
            return None
        if isinstance(head.target, int):
            return torch.full((int(rows.shape[0]),), head.target, dtype=torch.long)
        if head.target == "label":
            assert head.labels is not None
            return self.probe[head.labels][rows].to(torch.long)
        return None if head.classes is None else head.classes[rows]

    def fix_classes(self, model: nn.Module, x: torch.Tensor) -> None:
        """Each ``target: argmax`` head's class per probe example, read at the probe inputs."""
        pending = [h for h in self.heads if h.target == "argmax" and h.target_fn is None]
        if not pending:
            return
        with torch.no_grad():
            raw = self.raw_output(model, x)
            rows = self.last_rows
            assert rows is not None
            for head in pending:
                out = select_output(raw, head.path)
                classes = torch.zeros(self.n, dtype=torch.long)
                if out.dim() >= 2:
                    flat = out.detach().reshape(out.shape[0], out.shape[1], -1).sum(dim=2)
                    classes[rows] = flat.argmax(dim=1).cpu()
                head.classes = classes

    def split(self, output: torch.Tensor) -> list[torch.Tensor]:
        """Each head's output (k, *shape) from ``[F | heads flattened]``."""
        k, start, outs = output.shape[0], 1, []
        for head in self.heads:
            assert head.shape is not None, "a head's shape is known after the first call"
            size = int(torch.Size(head.shape).numel())
            outs.append(output[:, start : start + size].reshape(k, *head.shape))
            start += size
        return outs

    def loss(self, output: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """The sum of the heads' losses, each on its own targets at ``rows`` (every head has a
        loss when any has: the spec says so)."""
        rows = rows.detach().reshape(-1).to(torch.long).cpu()
        total: torch.Tensor | None = None
        for head, out in zip(self.heads, self.split(output), strict=True):
            assert head.loss_fn is not None
            labels = self._head_labels(head, rows, out.device)
            term = head.loss_fn(out, labels_like(labels, out))
            total = term if total is None else total + term
        assert total is not None
        return total
