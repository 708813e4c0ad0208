"""The spec's named inputs, ``output:``, ``heads:`` and target function loaded into a
:class:`~attest.spec.model_call.ModelCall`, with the probe packed into the tensor every check
differentiates (docs/spec.md, "Inputs, outputs, targets").

Every problem is a :class:`~attest.errors.ConfigError` or :class:`~attest.errors.InputError`
naming the spec, the probe key and what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attest.errors import ConfigError, InputError
from attest.spec.embedding_bag import token_embeddings
from attest.spec.factory import resolve_callable
from attest.spec.files import check_finite, check_target, first_line
from attest.spec.model import SpecFile
from attest.spec.model_call import Head, InputPart, ModelCall, labels_like
from attest.spec.reference_tokens import REFERENCE_KINDS, baseline_kind, resolve_reference
from attest.spec.sections import FACTORY_RE, output_path_parts

__all__ = ["LoadedCall", "load_call", "needs_call", "plain_loss"]

# The row column is exact in the deployed precision up to these probe sizes (the float's
# integer range: 2^8 for bfloat16, 2^11 for float16).
_MAX_ROWS = {"bfloat16": 256, "float16": 2048, "float32": 1 << 24}


@dataclass
class LoadedCall:
    """What load_spec takes from the call: x, the labels, F and the loss."""

    call: ModelCall
    inputs: torch.Tensor
    labels: torch.Tensor | None
    target: int | str
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None
    signatures: list[int] | None = None
    signature_labels: list[str] | None = None


def shape_signatures(
    spec: SpecFile, call: ModelCall, n: int
) -> tuple[list[int] | None, list[str] | None]:
    """``dynamic:``: each example's signature (the index of its distinct values of the dynamic
    inputs, in order of first appearance) and each signature's label."""
    if not spec.dynamic:
        return None, None
    keys = {p.name: p.key for p in call.parts}
    seen: dict[tuple[Any, ...], int] = {}
    labels: list[str] = []
    signatures = []
    for i in range(n):
        values = tuple(
            tuple(call.probe[keys[name]][i].reshape(-1).tolist()) for name in spec.dynamic
        )
        if values not in seen:
            seen[values] = len(seen)
            shown = [
                f"{name}={v[0] if len(v) == 1 else list(v[:8])}{'...' if len(v) > 8 else ''}"
                for name, v in zip(spec.dynamic, values, strict=True)
            ]
            labels.append(", ".join(shown))
        signatures.append(seen[values])
    return signatures, labels


def needs_call(spec: SpecFile) -> bool:
    """Whether the spec leaves the single-input form: named inputs, an output path, heads or a
    target function."""
    return bool(
        spec.inputs.named
        or spec.output is not None
        or spec.heads
        or (isinstance(spec.target, str) and FACTORY_RE.match(spec.target))
    )


def plain_loss(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The spec's loss with float targets in the output's dtype (:func:`labels_like`)."""

    def loss(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return fn(output, labels_like(labels, output))

    return loss


def _parts(
    spec: SpecFile, raw: dict[str, torch.Tensor], where: str, written: dict[str, Any]
) -> list[InputPart]:
    """The named inputs in packing order; ``written`` receives each one's ``baseline:`` as
    the spec gives it (the reference-token mapping is resolved against the model later)."""
    if not spec.inputs.named:  # the single-input form with an output path or target function
        return [InputPart("x", "x", "attributed", 0, None, baseline=spec.baseline)]
    parts = []
    for name, item in spec.inputs.named.items():
        key = item.key or name
        if key not in raw:
            raise InputError(
                f"{where}: input {name!r} reads probe key {key!r}, which the probe lacks "
                f"(it holds {sorted(raw)})",
                hint="store the tensor under that key, or set key: to the probe's name for it",
            )
        # the spec's baseline: is an attributed input's default; an embedded input's is zero
        default = "zero" if item.role == "embedded" else spec.baseline
        written[name] = item.baseline or default
        parts.append(
            InputPart(
                name,
                key,
                item.role,
                item.arg,
                item.kwarg,
                item.embedding,
                baseline_kind(item.baseline or default),
            )
        )
    order = {"attributed": 0, "embedded": 0, "fixed": 1}
    return sorted(parts, key=lambda p: order[p.role])  # stable: differentiated ones first


def _check_tensor(part: InputPart, tensor: torch.Tensor, where: str, probe_path: Path) -> None:
    dtype = str(tensor.dtype).removeprefix("torch.")
    if tensor.dim() < 1 or tensor.shape[0] < 1:
        raise InputError(
            f"{where}: probe key {part.key!r} has shape {tuple(tensor.shape)}; "
            "expected (N, ...) with N >= 1"
        )
    if part.role == "attributed" and not tensor.is_floating_point():
        raise InputError(
            f"{where}: input {part.name!r} is role: attributed but probe key {part.key!r} has "
            f"dtype {dtype}; an attributed input is floating point",
            hint="integer token ids are role: embedded; masks and lengths are role: fixed",
        )
    if part.role == "embedded" and (tensor.is_floating_point() or tensor.is_complex()):
        raise InputError(
            f"{where}: input {part.name!r} is role: embedded but probe key {part.key!r} has "
            f"dtype {dtype}; embedded inputs are integer ids",
            hint="floating inputs are role: attributed",
        )
    check_finite(probe_path, part.key, tensor)


def _embedding_module(part: InputPart, model: nn.Module, where: str) -> nn.Module:
    """The module ``embedding:`` names (a ConfigError listing the model's lookups if none)."""
    assert part.embedding is not None
    try:
        return model.get_submodule(part.embedding)
    except AttributeError:
        kinds = (nn.Embedding, nn.EmbeddingBag)
        names = [n for n, m in model.named_modules() if isinstance(m, kinds)]
        raise ConfigError(
            f"{where}: input {part.name!r}: the model has no module {part.embedding!r}",
            hint=f"name the embedding module; the model's embedding modules: {names}",
        ) from None


def _lookup(
    part: InputPart, module: nn.Module, ids: torch.Tensor, where: str, what: str
) -> torch.Tensor:
    """``ids``' embeddings from the trained embedding module (``what``: the probe key, or the
    reference-token sequence, for the messages)."""
    if isinstance(module, nn.EmbeddingBag) and ids.dim() != 2:
        raise ConfigError(
            f"{where}: input {part.name!r}: embedding module {part.embedding!r} is an "
            f"nn.EmbeddingBag and probe key {part.key!r} has shape {tuple(ids.shape)}; a bag "
            "module's ids must be padded bags (N, L), one bag per example",
            hint="store the ids as (N, L) padded with the bag's padding_idx, not flat with offsets",
        )
    try:
        with torch.no_grad():
            out = (
                token_embeddings(module, ids)  # per token: the bag's pooling runs in its hook
                if isinstance(module, nn.EmbeddingBag)
                else module(ids)
            )
    except Exception as exc:
        raise ConfigError(
            f"{where}: input {part.name!r}: embedding module {part.embedding!r} raised "
            f"{type(exc).__name__} on {what}: {first_line(exc)}",
            hint="embedding: names the module that maps the ids to vectors",
        ) from None
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        raise ConfigError(
            f"{where}: embedding module {part.embedding!r} does not return a floating tensor"
        )
    if out.dim() != ids.dim() + 1 or out.shape[: ids.dim()] != ids.shape:
        # IG sums each token's attribution over the last dim: one vector per id is required
        raise ConfigError(
            f"{where}: input {part.name!r}: embedding module {part.embedding!r} returns shape "
            f"{tuple(out.shape)} for ids of shape {tuple(ids.shape)}; an embedded input's "
            "module must return one vector per id (ids' shape + (D,))",
            hint="name the lookup itself (an nn.Embedding or nn.EmbeddingBag), not a module "
            "that pools or reshapes its output",
        )
    return out.detach().to(torch.float32)


def _embeddings(
    part: InputPart, written: Any, model: nn.Module, ids: torch.Tensor, where: str
) -> torch.Tensor:
    """The ids' embeddings (the embedded part of x), and on ``part`` its reference-token
    sequence's rule and embeddings when ``written`` (its ``baseline:``) asks for one, or,
    for the zero baseline, when ``pad``'s rule resolves (for ig_baseline's comparison)."""
    module = _embedding_module(part, model, where)
    out = _lookup(part, module, ids, where, f"probe key {part.key!r}")
    rule = resolve_reference(written, module, model, f"{where}: input {part.name!r}")
    if rule is None:
        return out
    reference_ids = rule.ids(ids)
    if part.baseline in REFERENCE_KINDS:
        same = (reference_ids == ids).reshape(ids.shape[0], -1).all(dim=1)
        if bool(same.any()):
            first = int(same.nonzero()[0, 0])
            raise ConfigError(
                f"{where}: input {part.name!r}: the reference-token baseline (token "
                f"{rule.token}, keep {list(rule.keep)}) leaves probe example {first} as it is "
                "(every token kept or already the reference): integrated gradients from it "
                "attribute nothing",
                hint="drop that example from the probe, or choose another reference token",
            )
    part.reference = _lookup(part, module, reference_ids, where, "the reference-token sequence")
    replaced = part.reference[reference_ids == rule.token]
    # padding_idx's row is zeroed at init and never trained: pad's reference is then the zero
    # baseline at every replaced token (ig_baseline says so when it fails)
    part.reference_rule = {**rule.record(), "token_embedding_zero": bool((replaced == 0).all())}
    return out


def _heads(spec: SpecFile, spec_dir: Path, where: Path, raw: dict[str, Any]) -> list[Head]:
    def resolve(name: Any, what: str) -> Any:
        return resolve_callable(name, spec_dir, what=what, spec_path=where) if name else None

    def labels_key(key: str | None, target: Any = None) -> str | None:
        if key is not None and key not in raw:
            raise InputError(
                f"spec {where}: head labels {key!r} are not in the probe (it holds {sorted(raw)})"
            )
        if key is not None and target == "label":
            labels = raw[key]
            if labels.is_floating_point() or labels.dim() != 1 or bool((labels < 0).any()):
                raise InputError(
                    f"spec {where}: a head with target: label reads {key!r}, which must hold one "
                    f"non-negative integer class per example (it is "
                    f"{str(labels.dtype).removeprefix('torch.')} {tuple(labels.shape)})",
                    hint="float targets are read by the head's loss; use target: argmax or a class",
                )
        return key

    if spec.heads:
        return [
            Head(
                name,
                output_path_parts(h.output),
                h.target,
                resolve(h.target, "target") if _is_fn(h.target) else None,
                resolve(h.loss, "loss"),
                labels_key(h.labels, h.target),
            )
            for name, h in spec.heads.items()
        ]
    if _is_fn(spec.target):  # a target function: one head, the spec's output and loss
        path = None if spec.output is None else output_path_parts(spec.output)
        loss = resolve(spec.loss, "loss")
        label = "target" if "target" in raw else None
        if loss is not None and label is None:
            raise ConfigError(f"spec {where}: loss: needs the probe's 'target' tensor")
        return [Head("output", path, spec.target, resolve(spec.target, "target"), loss, label)]
    return []


def _is_fn(target: Any) -> bool:
    return isinstance(target, str) and bool(FACTORY_RE.match(target))


def load_call(
    spec: SpecFile,
    spec_path: Path,
    probe_path: Path,
    raw: dict[str, torch.Tensor],
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
) -> LoadedCall:
    """The call, x packed from the probe, and the labels, target and loss the checks use."""
    where = f"spec {spec_path}"
    written: dict[str, Any] = {}
    parts = _parts(spec, raw, where, written)
    sizes = {int(raw[p.key].shape[0]) for p in parts if raw[p.key].dim()}
    if len(sizes) != 1:
        raise InputError(
            f"{where}: the named probe tensors disagree on the batch size N: {sorted(sizes)}",
            hint="every input holds the same N examples",
        )
    n = sizes.pop()
    values: dict[str, torch.Tensor] = {}
    for part in parts:
        tensor = raw[part.key]
        _check_tensor(part, tensor, where, probe_path)
        if part.role == "attributed":
            values[part.name] = tensor.contiguous()
        elif part.role == "embedded":
            values[part.name] = _embeddings(part, written[part.name], model, tensor, where)
        if part.name in values:
            part.shape = tuple(values[part.name].shape[1:])
    heads = _heads(spec, spec_path.parent, spec_path, raw)
    rows = bool(heads) or any(p.role != "attributed" for p in parts)
    differentiated = [p for p in parts if p.role != "fixed"]
    offset = 0
    for part in differentiated:
        part.offset, offset = offset, offset + part.size
    if rows and n > _MAX_ROWS[spec.precision]:
        raise ConfigError(
            f"{where}: {n} probe examples with named inputs at precision {spec.precision}: the "
            f"probe's row numbers are exact up to {_MAX_ROWS[spec.precision]} in that precision",
            hint=f"use at most {_MAX_ROWS[spec.precision]} probe examples",
        )
    path = None if spec.output is None else output_path_parts(spec.output)
    probe = {k: v.contiguous() for k, v in raw.items()}
    flat = rows or len(differentiated) > 1
    call = ModelCall(parts, probe, path, heads, rows=rows, flat=flat)
    x = call.pack(values)
    signatures, signature_labels = shape_signatures(spec, call, n)
    if heads:
        loss = call.loss if any(h.loss_fn is not None for h in heads) else None
        return LoadedCall(call, x, torch.arange(n), 0, loss, signatures, signature_labels)
    target = raw.get("target")
    labels = None if target is None else check_target(probe_path, target, n)
    return LoadedCall(call, x, labels, spec.target, loss_fn, signatures, signature_labels)
