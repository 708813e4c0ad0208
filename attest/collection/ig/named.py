"""IG attributions of named inputs, per input, for the evidence (docs/spec.md, "Inputs,
outputs, targets").

IG differentiates the packed tensor of :mod:`attest.spec.model_call`; its attributions are
split back into the named inputs here: an attributed input's in its own shape, an embedded
input's summed over the embedding dimension (one figure per token). The report draws the
first input beside its values (the ids, for token inputs); every input's total per example,
and each token's attribution, go into the evidence next to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attest.spec.model_call import ModelCall

__all__ = ["named_attributions"]


def _json_figures(t: torch.Tensor) -> Any:
    """Nested lists of a tensor's values, None where not finite (strict JSON)."""
    if t.dim() <= 1:
        return [float(v) if np.isfinite(v) else None for v in t.cpu().numpy().reshape(-1)]
    return [_json_figures(row) for row in t]


# per-token figures are kept up to this many (examples x tokens) per input
MAX_TOKEN_FIGURES = 1 << 16


def named_attributions(
    call: ModelCall, attributions: torch.Tensor, inputs: torch.Tensor
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(attributions, inputs) of the input the report draws, and the ``named_inputs`` record:
    per differentiated input its name, role, shape, total attribution per example and, for
    an embedded input, the attribution of each token."""
    attr = call.parts_of(attributions.detach().to(torch.float64))
    values, rows = call.unpack(inputs.detach())
    record: list[dict[str, Any]] = []
    shown: tuple[np.ndarray, np.ndarray] | None = None
    for part in call.differentiated:
        a = attr[part.name]
        entry: dict[str, Any] = {
            "name": part.name,
            "role": part.role,
            "shape": list(part.shape),
            "baseline": part.baseline,
            "total": _json_figures(a.reshape(a.shape[0], -1).sum(dim=1)),
        }
        if part.role == "embedded":
            assert rows is not None
            per_token = a.sum(dim=-1)  # one figure per token: summed over the embedding dims
            if per_token.numel() <= MAX_TOKEN_FIGURES:
                entry["per_token"] = _json_figures(per_token)
            ids = call.probe[part.key][rows].to(torch.float64)
            pair = (per_token.cpu().numpy(), ids.cpu().numpy())
        else:
            pair = (a.cpu().numpy(), values[part.name].to(torch.float64).cpu().numpy())
        if shown is None:
            shown = pair
            entry["drawn"] = True
        record.append(entry)
    assert shown is not None
    return shown[0], shown[1], {"named_inputs": record}
