"""The reference-token baseline of an embedded input (``baseline: pad`` or ``baseline: {token:
ID, keep: [ID, ...]}``, docs/spec.md): each example's ids with every token replaced by one
reference id except the kept ones (``[CLS]``, ``[SEP]``, ``<s>``, ``</s>``), as Captum's BERT
tutorials and the IG paper's text experiments build it. Its embeddings are the embedding
module's own output for those ids, computed once per example at load
(:mod:`attest.spec.load_call`), so position and token-type embeddings the model adds after the
module still come from the model along the whole path.

``pad``'s reference id is the embedding module's ``padding_idx``, else the model's Hugging Face
config's ``pad_token_id``; its kept ids are the special ids that config names (``cls``,
``sep``, ``bos``, ``eos``), else none. The zero-vector baseline stays the default; when an
embedded input keeps it, the ``pad`` reference is still resolved where it can be, so that
``ig_baseline`` can compare the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attest.errors import ConfigError
from attest.spec.sections import TokenBaseline

__all__ = ["REFERENCE_KINDS", "Reference", "baseline_kind", "resolve_reference"]

# InputPart.baseline of an input integrated from its reference-token sequence: "pad" as
# written, "token" for the {token: ID, keep: [...]} form
REFERENCE_KINDS = ("pad", "token")
_SPECIAL = ("cls_token_id", "sep_token_id", "bos_token_id", "eos_token_id")


@dataclass(frozen=True)
class Reference:
    """A reference-token sequence's rule: the id every token becomes, the ids left in place,
    and where each came from (for the evidence)."""

    token: int
    keep: tuple[int, ...]
    token_from: str  # "spec", "padding_idx" or "config.pad_token_id"
    keep_from: str  # "spec", "config" or "none"

    def ids(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids`` with every token replaced by :attr:`token`, the :attr:`keep` ids in place."""
        kept = torch.isin(ids, torch.tensor(self.keep, dtype=ids.dtype, device=ids.device))
        return torch.where(kept, ids, torch.full_like(ids, self.token))

    def record(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "keep": list(self.keep),
            "token_from": self.token_from,
            "keep_from": self.keep_from,
        }


def baseline_kind(baseline: str | TokenBaseline) -> str:
    """An input's baseline as :class:`~attest.spec.model_call.InputPart` holds it: the kind's
    name, ``token`` for the mapping form."""
    return "token" if isinstance(baseline, TokenBaseline) else baseline


def _config_ids(model: nn.Module, name: str) -> list[int]:
    """The ids ``model.config.<name>`` gives (a Hugging Face config: an int, a list of ints
    (several ``eos``), or None); none for a model without a config."""
    config = getattr(model, "config", None)
    value = getattr(config, name, None) if config is not None else None
    values = value if isinstance(value, (list, tuple)) else [value]
    return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]


def _pad(module: nn.Module, model: nn.Module) -> tuple[int, str] | None:
    padding_idx = getattr(module, "padding_idx", None)
    if isinstance(padding_idx, int) and padding_idx >= 0:
        return padding_idx, "padding_idx"
    configured = _config_ids(model, "pad_token_id")
    return (configured[0], "config.pad_token_id") if configured else None


def resolve_reference(
    baseline: str | TokenBaseline,
    module: nn.Module,
    model: nn.Module,
    where: str,
) -> Reference | None:
    """The reference-token rule of an embedded input whose ``baseline:`` is ``baseline`` (its
    embedding module ``module``, in ``model``): the spec's mapping, or ``pad``'s rule (module
    docstring). For ``zero`` the ``pad`` rule where one can be found (for ``ig_baseline``'s
    comparison), else None; for ``pad`` without a padding id, a :class:`ConfigError` saying
    which form to write."""
    if isinstance(baseline, TokenBaseline):
        reference = Reference(baseline.token, tuple(baseline.keep), "spec", "spec")
    else:
        pad = _pad(module, model)
        if pad is None:
            if baseline != "pad":
                return None
            raise ConfigError(
                f"{where}: baseline: pad needs a padding id, and the embedding module has no "
                "padding_idx and the model no Hugging Face config with a pad_token_id",
                hint="name the reference id yourself: baseline: {token: ID, keep: [ID, ...]} "
                "(e.g. the tokenizer's [PAD], [MASK] or [UNK] id, with [CLS]/[SEP] or "
                "<s>/</s> in keep)",
            )
        token, token_from = pad
        keep = tuple(
            dict.fromkeys(i for n in _SPECIAL for i in _config_ids(model, n) if i != token)
        )
        reference = Reference(token, keep, token_from, "config" if keep else "none")
    rows = getattr(module, "num_embeddings", None)
    if isinstance(rows, int) and reference.token >= rows:
        if baseline == "zero":  # only compared, never integrated: no reference to compare
            return None
        raise ConfigError(
            f"{where}: the reference token {reference.token} is outside the embedding "
            f"module's {rows} ids",
            hint="baseline: {token: ID} takes an id of the tokenizer's vocabulary",
        )
    return reference
