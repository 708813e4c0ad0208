"""Named inputs for :func:`~attest.testing.gradient_checks.check_gradients`: a tuple or mapping
of tensors called as the model's arguments, with the roles of ``attest.yaml`` (docs/spec.md,
"Inputs, outputs, targets"), through the same :class:`~attest.spec.model_call.ModelCall`
that ``attest collect`` uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from attest.core.validation import validation_problems
from attest.errors import InputError
from attest.spec.load_call import LoadedCall, load_call
from attest.spec.model import SpecFile

__all__ = ["named_call"]


def _default_role(key: str, tensor: torch.Tensor, positional: int | None) -> dict[str, Any]:
    """A floating tensor is attributed, any other fixed (never cast; ids need
    ``role: embedded`` with their embedding module, given in ``roles``)."""
    place: dict[str, Any] = {"arg": positional} if positional is not None else {"kwarg": key}
    return {**place, "role": "attributed" if tensor.is_floating_point() else "fixed"}


def named_call(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
    *,
    roles: Mapping[str, Mapping[str, Any]] | None,
    output: str | int | None,
    target: torch.Tensor | None,
    loss: Callable[[Any, Any], torch.Tensor] | None,
    name: str,
) -> LoadedCall:
    """The call for ``inputs``: a tuple is passed positionally (names ``arg0``, ``arg1``, ...),
    a mapping by keyword; ``roles`` overrides any input's entry (``{"ids": {"role":
    "embedded", "kwarg": "input_ids", "embedding": "emb"}}``)."""
    if isinstance(inputs, Mapping):
        raw = {str(k): v.detach() for k, v in inputs.items()}
        named = {k: _default_role(k, v, None) for k, v in raw.items()}
    else:
        raw = {f"arg{i}": v.detach() for i, v in enumerate(inputs)}
        named = {k: _default_role(k, v, i) for i, (k, v) in enumerate(raw.items())}
    shown = {k: (f"input {k.removeprefix('arg')}" if k.startswith("arg") else k) for k in raw}
    embedded = any(entry.get("role") == "embedded" for entry in (roles or {}).values())
    if not embedded and not any(v.is_floating_point() for v in raw.values()):
        raise InputError(
            f"no floating-point input among {', '.join(shown.values())}: integer inputs such as "
            "token ids have no gradient, and casting them to float would change what the model "
            "reads",
            hint="add the float input the gradients are taken with respect to, or "
            "differentiate the ids at their embedding: roles={NAME: {'role': 'embedded', "
            "'embedding': MODULE}}",
        )
    sizes = {k: tuple(v.shape) for k, v in raw.items()}
    if len({shape[0] if shape else None for shape in sizes.values()}) > 1:
        raise InputError(
            "the inputs must share the batch dimension (dim 0): "
            + ", ".join(f"{shown[k]} {shape}" for k, shape in sizes.items()),
        )
    for key, entry in (roles or {}).items():
        named[key] = {**named.get(key, {}), **entry}
        if "arg" in entry:
            named[key].pop("kwarg", None)
        if "kwarg" in entry:
            named[key].pop("arg", None)
    if target is not None:
        raw["target"] = target.detach()
    document: dict[str, Any] = {
        "model": {"name": name, "version": "test", "factory": "m:f", "weights": "-"},
        "inputs": {"probe": "-", **named},
        "target": "label" if target is not None and loss is None else "argmax",
    }
    if output is not None:
        document["output"] = output
    try:
        spec = SpecFile.model_validate(document)
    except ValidationError as exc:
        raise InputError(
            f"named inputs of {name}: {validation_problems(exc)}",
            hint="integer token ids need roles={NAME: {'role': 'embedded', 'embedding': "
            "MODULE}}; roles take the keys of attest.yaml's inputs: (docs/spec.md)",
        ) from None
    where = Path(name)
    return load_call(spec, where, where, raw, model, loss)
