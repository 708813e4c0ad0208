"""check_gradients (and the pytest plugin) on models with several inputs: a tuple or a dict,
float inputs differentiated, token ids and masks passed unchanged (never cast to float)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attest.errors import InputError
from attest.testing.gradient_checks import check_gradients
from attest.testing.named_inputs import named_call

CHECKS = ("topology", "gradcheck", "gradient_flow", "numerics")


class Fusion(nn.Module):
    """An image and a tabular vector, as a clinical fusion model takes them."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.tab = nn.Linear(5, 3)
        self.head = nn.Linear(6, 2)

    def forward(self, image: torch.Tensor, tabular: torch.Tensor) -> torch.Tensor:
        pooled = torch.tanh(self.conv(image)).mean(dim=(2, 3))
        return self.head(torch.cat([pooled, torch.tanh(self.tab(tabular))], dim=1))


class Tokens(nn.Module):
    """Float features plus integer token ids and a padding mask; refuses ids cast to float."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 4)
        self.proj = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)
        self.seen: list[torch.dtype] = []

    def forward(
        self, features: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        if ids.dtype != torch.long:
            raise TypeError(f"token ids must stay integer, got {ids.dtype}")
        self.seen.append(ids.dtype)
        h = torch.tanh(self.proj(features) + self.embed(ids))
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        return self.head(h.sum(dim=1))


def probe(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(2, 5, 4, generator=g)
    ids = torch.randint(0, 11, (2, 5), generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    return features, ids, mask


def test_a_tuple_of_float_inputs_is_differentiated_in_both() -> None:
    torch.manual_seed(0)
    model = Fusion()
    image, tabular = torch.randn(2, 1, 6, 6), torch.randn(2, 5)
    result = check_gradients(model, (image, tabular), checks=CHECKS)
    assert result.passed, result.summary()
    loaded = named_call(
        model, (image, tabular), roles=None, output=None, target=None, loss=None, name="m"
    )
    packed = loaded.inputs
    assert not loaded.call.rows and packed.shape == (2, 36 + 5)
    bound = loaded.call.install(copy.deepcopy(model))
    packed.requires_grad_(True)
    bound(packed).sum().backward()
    assert packed.grad is not None
    assert bool(packed.grad[:, :36].abs().sum() > 0) and bool(packed.grad[:, 36:].abs().sum() > 0)
    assert torch.equal(bound(packed.detach()), model(image, tabular))  # the same call


def test_token_ids_and_masks_are_passed_unchanged() -> None:
    torch.manual_seed(0)
    model = Tokens()
    features, ids, mask = probe()
    result = check_gradients(model, (features, ids, mask), checks=CHECKS)
    assert result.passed, result.summary()
    evidence = result.evidence
    assert evidence.checks["gradcheck"].status == "computed"
    assert len(model.seen) == 0  # the caller's module is never run or changed


def test_a_dict_of_inputs_is_passed_as_keyword_arguments() -> None:
    torch.manual_seed(0)
    features, ids, mask = probe()
    result = check_gradients(
        Tokens(), {"features": features, "ids": ids, "mask": mask}, checks=("gradcheck",)
    )
    assert result.passed, result.summary()


def test_integer_inputs_alone_are_refused_not_cast() -> None:
    _, ids, mask = probe()
    with pytest.raises(InputError, match="integer inputs such as token ids have no gradient"):
        check_gradients(Tokens(), ids)
    with pytest.raises(InputError, match=r"no floating-point input .*input 0, input 1"):
        check_gradients(Tokens(), (ids, mask))


def test_checks_that_rebatch_run_with_fixed_inputs() -> None:
    # IG's path points and sub-batches carry each example's row: its ids go with it
    torch.manual_seed(0)
    features, ids, _ = probe()
    result = check_gradients(
        Tokens(),
        (features, ids),
        checks=("gradcheck", "ig_completeness", "accumulation"),
        target=torch.tensor([0, 2]),
        loss=F.cross_entropy,
    )
    assert result.passed, result.summary()
    assert result.evidence.checks["ig_completeness"].status == "computed"


def test_inputs_must_share_the_batch_dimension() -> None:
    features, ids, _ = probe()
    with pytest.raises(InputError, match="must share the batch dimension"):
        check_gradients(Tokens(), (features, ids[:1]))


def test_a_compiled_model_is_checked_as_its_eager_original() -> None:
    torch.manual_seed(0)
    model = torch.compile(Fusion(), backend="eager")
    image, tabular = torch.randn(2, 1, 6, 6), torch.randn(2, 5)
    result = check_gradients(model, (image, tabular), checks=("gradcheck",))
    assert result.passed, result.summary()
    assert result.evidence.compile is not None and result.evidence.compile.backend == "eager"
    assert type(model).__name__ == "OptimizedModule"  # the caller's module is left as it was


def test_a_bert_classifier_from_its_embeddings_with_an_attention_mask() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=30,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        num_labels=2,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config).eval()
    embeds = torch.randn(2, 5, 8)
    attention_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    result = check_gradients(
        model,
        {"inputs_embeds": embeds, "attention_mask": attention_mask},
        checks=("gradcheck", "numerics"),
        target=torch.tensor([0, 1]),
        loss=F.cross_entropy,
    )
    assert result.passed, result.summary()
