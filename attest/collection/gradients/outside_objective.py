"""Parameters that the probe objective does not reach by the spec's design, told apart from dead
branches for ``gradient_flow``:

- an embedded input's embedding table (``role: embedded``): the checks differentiate its
  output, the ids' embeddings, which replace the table's lookup; the table's gradient is then
  the embeddings' gradient routed back through the lookup, as ``nn.Embedding``'s backward
  does (rows summed per id, none to ``padding_idx``): :func:`embedding_gradients` computes it,
  so it is measured, not assumed;
- parameters that feed only model outputs the spec does not select (the second element of a
  tuple output when ``output: 0``; a head that ``heads:`` leaves out):
  :func:`unselected_output_parameters` finds them by differentiating the outputs F does not
  read.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.capture.tensors import flat_tensors
from attest.spec import LoadedSpec

__all__ = ["embedding_gradients", "unselected_output_parameters"]


def embedding_gradients(
    spec: LoadedSpec, model: nn.Module, x: torch.Tensor, input_grad: torch.Tensor | None
) -> dict[str, torch.Tensor]:
    """The gradient of each embedded input's ``nn.Embedding`` (or ``nn.EmbeddingBag``) weight (by parameter name), from
    the gradient with respect to ``x``; empty without embedded inputs."""
    call = spec.call
    if call is None or input_grad is None:
        return {}
    embedded = [p for p in call.differentiated if p.role == "embedded"]
    if not embedded:
        return {}
    parts, rows = call.unpack(input_grad)
    _, rows = call.unpack(x)
    assert rows is not None
    names = {id(p): n for n, p in model.named_parameters()}
    grads: dict[str, torch.Tensor] = {}
    for part in embedded:
        assert part.embedding is not None
        module = model.get_submodule(part.embedding)
        # an nn.EmbeddingBag's part is its per-token lookup too (attest.spec.embedding_bag)
        kinds = (nn.Embedding, nn.EmbeddingBag)
        if not isinstance(module, kinds) or id(module.weight) not in names:
            continue
        ids = call.probe[part.key][rows].to(module.weight.device).reshape(-1)
        g = parts[part.name].detach().reshape(ids.numel(), -1).to(module.weight.dtype)
        weight_grad = torch.zeros_like(module.weight).index_add_(0, ids, g)
        if module.padding_idx is not None:
            weight_grad[module.padding_idx] = 0  # nn.Embedding's (and the bag's) documented rule
        name = names[id(module.weight)]
        grads[name] = weight_grad
    return grads


def unselected_output_parameters(
    spec: LoadedSpec, model: nn.Module, x: torch.Tensor, names: list[str]
) -> dict[str, str]:
    """Of ``names`` (parameters without a gradient), those that some model output F does not
    read depends on, each with a phrase naming those outputs."""
    call = spec.call
    params = dict(model.named_parameters())
    wanted = [n for n in names if n in params and params[n].requires_grad]
    if not wanted:
        return {}
    with torch.enable_grad():
        if call is not None:
            raw: Any = call.raw_output(model, x)
            selected = call.selected(raw)
        else:
            raw = model(x)
            selected = [model_output_tensor(raw)]
        others = [
            t
            for t in flat_tensors(raw)
            if t.requires_grad and t.is_floating_point() and not any(t is s for s in selected)
        ]
        if not others:
            return {}
        total = sum(
            (t.to(torch.float64).sum() for t in others), torch.zeros((), dtype=torch.float64)
        )
        grads = torch.autograd.grad(total, [params[n] for n in wanted], allow_unused=True)
    what = f"{len(others)} model output(s) that F does not read (output:/heads: select others)"
    return {n: what for n, g in zip(wanted, grads, strict=True) if g is not None and bool(g.any())}
