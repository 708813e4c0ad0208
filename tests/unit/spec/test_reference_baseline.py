"""An embedded input's reference-token baseline (``baseline: pad`` and ``baseline: {token: ID,
keep: [...]}``, docs/spec.md): parsed strictly, its embeddings the embedding module's own output
for the reference ids with the kept ids in place, and used by the IG checks' baseline."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from attest.collection.ig.baselines import (  # noqa: E402
    REFERENCE_TOKEN,
    call_baseline,
    compared_baselines,
)
from attest.errors import ConfigError, InputError  # noqa: E402
from attest.spec import parse_spec_file  # noqa: E402
from attest.spec.embedding_bag import token_embeddings  # noqa: E402
from attest.testing.named_inputs import named_call  # noqa: E402

HEAD = "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"


def _parse(tmp_path: Path, entry: str, extra: str = "") -> Any:
    path = tmp_path / "attest.yaml"
    path.write_text(
        HEAD + f"inputs:\n  probe: p.safetensors\n  ids: {entry}\n" + extra, encoding="utf-8"
    )
    return parse_spec_file(path)


EMBEDDED = "{{role: embedded, arg: 0, embedding: emb, baseline: {}}}"
ATTRIBUTED = "{{role: attributed, arg: 0, baseline: {}}}"

GOOD = [
    (EMBEDDED.format("zero"), "zero"),
    (EMBEDDED.format("pad"), "pad"),
    (EMBEDDED.format("{token: 3}"), {"token": 3, "keep": []}),
    (EMBEDDED.format("{token: 0, keep: [101, 102]}"), {"token": 0, "keep": [101, 102]}),
    (ATTRIBUTED.format("blur"), "blur"),
]

BAD = [
    (EMBEDDED.format("mean"), r"baseline: mean is an image baseline .* zero .* pad"),
    (EMBEDDED.format("blur"), r"means nothing for token ids"),
    (EMBEDDED.format("uniform"), r"image baseline"),
    (EMBEDDED.format("median"), r"'median' is not a baseline: .* zero, pad or \{token"),
    (EMBEDDED.format("7"), r"7 is not a baseline"),
    (EMBEDDED.format("{token: -1}"), r"token: Input should be greater than or equal to 0"),
    (EMBEDDED.format("{token: '3'}"), r"token: Input should be a valid integer"),
    (EMBEDDED.format("{token: true}"), r"token: Input should be a valid integer"),
    (EMBEDDED.format("{token: 1.0}"), r"token: Input should be a valid integer"),
    (EMBEDDED.format("{keep: [1]}"), r"token: required key is missing"),
    (EMBEDDED.format("{token: 1, keep: [1]}"), r"reference token 1 is also in keep"),
    (EMBEDDED.format("{token: 1, keep: [2, 2]}"), r"an id is listed twice"),
    (EMBEDDED.format("{token: 1, keep: [-2]}"), r"token ids are >= 0"),
    (EMBEDDED.format("{token: 1, mask: 4}"), r"mask: unknown key"),
    (ATTRIBUTED.format("pad"), r"reference-token baseline .* role: embedded"),
    (ATTRIBUTED.format("{token: 0}"), r"reference-token baseline .* role: embedded"),
    ("{role: fixed, arg: 0, baseline: pad}", r"fixed input is never integrated"),
]


@pytest.mark.parametrize(("entry", "expected"), GOOD)
def test_good_baseline_forms_parse(tmp_path: Path, entry: str, expected: Any) -> None:
    baseline = _parse(tmp_path, entry).inputs.named["ids"].baseline
    got = baseline if isinstance(baseline, str) else baseline.model_dump()
    assert got == expected


@pytest.mark.parametrize(("entry", "message"), BAD)
def test_bad_baseline_forms_are_refused_at_parse(tmp_path: Path, entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"inputs\.named\.ids(\.baseline)?:") as caught:
        _parse(tmp_path, entry)
    assert caught.match(message), str(caught.value)


class Classifier(nn.Module):
    """Token ids through an embedding, a position term added after it, mean-pooled."""

    def __init__(self, padding_idx: int | None = 0, vocab: int = 12) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, 4, padding_idx=padding_idx)
        self.pos = nn.Parameter(torch.randn(5, 4))
        self.head = nn.Linear(4, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.emb(ids) + self.pos[: ids.shape[1]]).mean(1))


IDS = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0], [1, 9, 9, 9, 2]])


def _loaded(model: nn.Module, baseline: Any, ids: torch.Tensor = IDS) -> Any:
    role = {"role": "embedded", "arg": 0, "embedding": "emb", "baseline": baseline}
    return named_call(
        model, (ids,), roles={"arg0": role}, output=None, target=None, loss=None, name="t"
    )


def _embedded(loaded: Any, x: torch.Tensor) -> torch.Tensor:
    return loaded.call.parts_of(x)["arg0"]


def test_the_reference_embeddings_are_the_module_output_with_kept_ids_in_place() -> None:
    torch.manual_seed(0)
    model = Classifier(padding_idx=None)
    loaded = _loaded(model, {"token": 3, "keep": [1, 2]})
    part = loaded.call.parts[0]
    assert part.baseline == "token"
    assert part.reference_rule == {
        "token": 3,
        "keep": [1, 2],
        "token_from": "spec",
        "keep_from": "spec",
        "token_embedding_zero": False,
    }
    reference = torch.tensor([[1, 3, 3, 2, 3], [1, 3, 2, 3, 3], [1, 3, 3, 3, 2]])
    with torch.no_grad():
        expected = model.emb(reference)
    baseline = call_baseline(loaded.call, None, loaded.inputs)
    torch.testing.assert_close(_embedded(loaded, baseline), expected.double(), rtol=0, atol=0)
    # the probe-row column is carried, so the fixed inputs stay the example's along the path
    assert torch.equal(baseline[:, -1], loaded.inputs[:, -1].double())
    # a subset of the probe (IG's groups, randomization's first inputs) keeps its own rows
    sub = call_baseline(loaded.call, None, loaded.inputs[1:])
    torch.testing.assert_close(_embedded(loaded, sub), expected[1:].double(), rtol=0, atol=0)
    # ig_baseline compares zero vectors and the reference tokens; zero is all zeros
    assert compared_baselines(loaded.call) == ("zero", REFERENCE_TOKEN)
    zero = call_baseline(loaded.call, "zero", loaded.inputs)
    assert not _embedded(loaded, zero).any()


def test_pad_takes_padding_idx_and_the_config_special_ids() -> None:
    torch.manual_seed(0)
    model = Classifier(padding_idx=0)
    model.config = SimpleNamespace(  # as a Hugging Face model's config names them
        pad_token_id=11, cls_token_id=1, sep_token_id=2, bos_token_id=None, eos_token_id=[2, 4]
    )
    part = _loaded(model, "pad").call.parts[0]
    # padding_idx first; the kept ids are the config's special ids
    assert part.reference_rule["token"] == 0 and part.reference_rule["token_from"] == "padding_idx"
    assert part.reference_rule["keep"] == [1, 2, 4] and part.reference_rule["keep_from"] == "config"
    # padding_idx's row is zeroed at init: the reference embeds to zero where it replaces
    assert part.reference_rule["token_embedding_zero"] is True
    # without padding_idx: the config's pad_token_id
    model = Classifier(padding_idx=None)
    model.config = SimpleNamespace(pad_token_id=11)
    part = _loaded(model, "pad").call.parts[0]
    assert (part.reference_rule["token"], part.reference_rule["token_from"]) == (
        11,
        "config.pad_token_id",
    )
    assert part.reference_rule["keep"] == [] and part.reference_rule["keep_from"] == "none"
    with torch.no_grad():
        expected = model.emb(torch.full_like(IDS, 11))
    torch.testing.assert_close(part.reference, expected, rtol=0, atol=0)


def test_zero_baseline_still_resolves_pad_for_the_comparison_only() -> None:
    loaded = _loaded(Classifier(padding_idx=0), None)
    part = loaded.call.parts[0]
    assert part.baseline == "zero" and part.reference is not None
    assert not _embedded(loaded, call_baseline(loaded.call, None, loaded.inputs)).any()
    # no padding id anywhere: nothing to compare, and zero stays the baseline
    loaded = _loaded(Classifier(padding_idx=None), "zero")
    assert loaded.call.parts[0].reference is None
    assert compared_baselines(loaded.call) == ("zero",)


@pytest.mark.parametrize(
    ("model", "baseline", "ids", "message"),
    [
        (Classifier(padding_idx=None), "pad", IDS, r"baseline: pad needs a padding id"),
        (Classifier(padding_idx=0), {"token": 12}, IDS, r"reference token 12 is outside .* 12 ids"),
        # every token of example 1 kept or already the reference: IG from it attributes nothing
        (Classifier(), {"token": 0, "keep": [1, 7, 2]}, IDS, r"leaves probe example 1 as it is"),
    ],
)
def test_reference_that_cannot_be_used_is_refused_at_load(
    model: nn.Module, baseline: Any, ids: torch.Tensor, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        _loaded(model, baseline, ids)
    if baseline == "pad":  # the hint says which form to write instead
        assert "baseline: {token: ID, keep: [ID, ...]}" in str(caught.value.hint)


def test_an_image_baseline_on_token_ids_is_refused_through_check_gradients_roles() -> None:
    with pytest.raises(InputError, match="means nothing for token ids"):
        _loaded(Classifier(), "blur")


def test_the_spec_wide_baseline_applies_to_attributed_inputs_only(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Classifier()
    roles = {"arg0": {"role": "embedded", "arg": 0, "embedding": "emb"}}
    from attest.spec.load_call import load_call
    from attest.spec.model import SpecFile

    spec = SpecFile.model_validate(
        {
            "model": {"name": "m", "version": "1", "factory": "m:f", "weights": "-"},
            "inputs": {"probe": "-", **roles},
            "baseline": "blur",
        }
    )
    loaded = load_call(spec, tmp_path, tmp_path, {"arg0": IDS}, model, None)
    assert loaded.call.parts[0].baseline == "zero"  # docs/spec.md: zero vectors by default
    assert not _embedded(loaded, call_baseline(loaded.call, None, loaded.inputs)).any()


def test_a_bag_module_takes_the_per_token_lookup_of_its_reference_ids() -> None:
    class Codes(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.EmbeddingBag(12, 4, mode="mean", padding_idx=0)
            self.head = nn.Linear(4, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.emb(ids))

    torch.manual_seed(0)
    model = Codes()
    loaded = _loaded(model, {"token": 11})
    with torch.no_grad():
        expected = token_embeddings(model.emb, torch.full_like(IDS, 11))
    baseline = call_baseline(loaded.call, None, loaded.inputs)
    torch.testing.assert_close(_embedded(loaded, baseline), expected.double(), rtol=0, atol=0)


def test_a_failing_item_names_the_reference_token_forms() -> None:
    import numpy as np

    from attest.collection.ig.neutrality import _embedded_note

    readings = {
        "zero": {"baseline_target_probability": np.array([0.91])},
        REFERENCE_TOKEN: {"baseline_target_probability": np.array([0.42])},
    }
    # from zero vectors: the forms to write, and the model's reading at pad's reference
    # (no padding id: nothing but zero vectors was compared)
    call = _loaded(Classifier(padding_idx=None), None).call
    note = _embedded_note(call, {"zero": readings["zero"]}, 0)
    assert "embedded input 'arg0' starts from zero vectors" in note
    assert "baseline: pad" in note and "baseline: {token: ID, keep: [ID, ...]}" in note
    assert "pad reference" not in note
    note = _embedded_note(_loaded(Classifier(padding_idx=0), None).call, readings, 0)
    assert "at its pad reference tokens p = 0.420" in note
    # padding_idx's row is zero: pad would start where zero vectors do, and it says so
    assert "embeds to the zero vector" in note
    # from its reference tokens: how zero vectors read; a trained row is not called zero
    call = _loaded(Classifier(padding_idx=None), {"token": 3, "keep": [1, 2]}).call
    note = _embedded_note(call, readings, 0)
    assert "not neutral for this model either (at zero vectors p = 0.910)" in note
    assert "embeds to the zero vector" not in note
