"""The perturbation ``kinks`` judges hits with, drawn as the model's inputs can move.

An attributed input moves coordinate by coordinate, so its noise is drawn per coordinate. An
embedded input (``role: embedded``) is ids looked up in a table: the only way its embeddings
move is through the table's rows, and every position holding the same id moves with the same
row. Its noise is therefore drawn once per distinct id and given to every position holding that
id, as a perturbation of the table would be. Independent noise per position broke ties no
input can break: a text CNN's max-over-time pooling over padded ids, whose all-padding windows
compute the same value from the same pad vector, was counted as a max tie a perturbation moves
off (a false ``kinks`` failure on a clean model); with the noise per id those windows stay tied
(locally constant, not counted), while a value on a kink that a row's movement moves off is
still counted.
"""

from __future__ import annotations

import torch

from attest.spec.model_call import ModelCall

__all__ = ["tie_to_ids"]


def tie_to_ids(
    call: ModelCall | None, x: torch.Tensor, noise: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """``noise`` (the shape of the packed probe ``x``) with each embedded input's part drawn
    per id: one vector per distinct id of the part's probe tensor, shared by its positions."""
    if call is None:
        return noise
    embedded = [p for p in call.differentiated if p.role == "embedded"]
    if not embedded:
        return noise
    rows = call.unpack(x)[1]  # embedded inputs are always packed flat, with their rows
    noise = noise.clone()
    for part in embedded:
        ids = call.probe[part.key]
        ids = ids[rows] if rows is not None else ids[: x.shape[0]]
        n = int(ids.shape[0])
        width = int(part.shape[-1])  # the embedding dimension
        unique, inverse = torch.unique(ids.reshape(-1), return_inverse=True)
        rows_noise = torch.randn(
            int(unique.numel()), width, generator=generator, dtype=noise.dtype
        ).to(noise.device)
        drawn = rows_noise[inverse.to(noise.device)].reshape(n, -1)
        noise[:, part.offset : part.offset + part.size] = drawn
    return noise
