"""Models nobody here wrote, certified from the spec alone (issue 34): named inputs with roles,
outputs selected from tuples and ModelOutputs, heads, float targets.

Each model is trained briefly on synthetic data in the test, collected, and held against
clinical-strict; the only failing findings allowed are the probe-size rules these small,
fast settings break on purpose (``repeats``, probe examples) and the ones named per test,
each true and explained there.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from attest.collection import collect
from attest.errors import ConfigError, InputError
from attest.policy.engine import evaluate
from attest.spec import load_spec

POLICY = Path(__file__).resolve().parents[3] / "policies" / "clinical-strict.yaml"
SETTINGS_RULES = {"min_repeats", "min_probe_examples", "probe_class_coverage"}
# What IG's sanity checks read off these tiny models and their baselines, true by the checks'
# definitions (the figures are in each failing finding): a zero or mean baseline is not
# neutral for a regression value or a regression head (|F(b)| / |F(x)| above 0.5), an encoder
# reads a zero sequence as a confident class, and a 16-unit model's attributions stay
# correlated with the input after randomization (Spearman 0.55-0.68 against 0.5). They judge
# the baseline and the model, not the calling of named inputs, which these tests are about.
IG_READINGS = {"ig_baseline.neutral", "ig_randomization.cascade"}


def _folder(tmp_path: Path, source: str, train: str, spec: str) -> Path:
    """model.py, weights trained by ``train`` (run with ``model`` built, seeded), the probe
    it writes, and attest.yaml; returns the spec's path."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "model.py").write_text(textwrap.dedent(source), encoding="utf-8")
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(source), str(tmp_path / "model.py"), "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["build"]()
    probe: dict[str, torch.Tensor] = {}
    exec(textwrap.dedent(train), {**namespace, "torch": torch, "model": model, "probe": probe})
    model.eval()
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        str(tmp_path / "weights.safetensors"),
    )
    save_file({k: v.contiguous() for k, v in probe.items()}, str(tmp_path / "probe.safetensors"))
    head = "model: {name: m, version: 1.0.0, factory: model:build, weights: weights.safetensors}\n"
    path = tmp_path / "attest.yaml"
    path.write_text(head + textwrap.dedent(spec) + "repeats: 2\n", encoding="utf-8")
    return path


def _failing(path: Path, keep: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """(rule, subject, message) of each failing clinical-strict finding but the settings';
    the evidence goes into ``keep["evidence"]`` when given."""
    evidence = collect(path)
    if keep is not None:
        keep["evidence"] = evidence
    findings = evaluate(evidence, POLICY)
    return [
        (f.rule, f.subject.name or f.subject.module or f.subject.kind, f.message)
        for f in findings.findings
        if f.verdict == "fail" and f.rule not in SETTINGS_RULES
    ]


FUSION = """
import torch
import torch.nn.functional as F
from torch import nn

class Fusion(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.img = nn.Linear(4, 8)
        self.tab = nn.Linear(5, 8)
        self.cls = nn.Linear(16, 3)
        self.risk = nn.Linear(16, 1)

    def forward(self, image, tabular):
        h = torch.tanh(self.conv(image)).mean(dim=(2, 3))
        z = torch.cat([torch.tanh(self.img(h)), torch.tanh(self.tab(tabular))], dim=1)
        return self.cls(z), self.risk(z)

def build():
    return Fusion()

def cls_loss(out, y):
    return F.cross_entropy(out, y)

def risk_loss(out, y):
    return F.mse_loss(out.squeeze(1), y)
"""

FUSION_TRAIN = """
g = torch.Generator().manual_seed(1)
image, tab = torch.randn(8, 1, 6, 6, generator=g), torch.randn(8, 5, generator=g)
cls = (tab[:, 0] > 0).long() + (image.mean(dim=(1, 2, 3)) > 0).long()
risk = tab[:, 1] * 0.5
opt = torch.optim.Adam(model.parameters(), 1e-2)
for _ in range(40):
    a, b = model(image, tab)
    loss = cls_loss(a, cls) + risk_loss(b, risk)
    opt.zero_grad(); loss.backward(); opt.step()
probe.update(image=image, tab=tab, cls=cls, risk=risk)
"""


def test_two_inputs_two_heads_are_called_and_differentiated_as_named(tmp_path: Path) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1, baseline: mean}
    heads:
      diagnosis: {output: 0, target: label, loss: model:cls_loss, labels: cls}
      risk: {output: 1, loss: model:risk_loss, labels: risk}
    """
    spec = load_spec(_folder(tmp_path, FUSION, FUSION_TRAIN, spec_text))
    call = spec.call
    assert call is not None and call.rows and call.computes_f
    # x: the image (36 values), the tabular vector (5), the probe row
    assert spec.inputs.shape == (8, 36 + 5 + 1)
    model = spec.build_model()
    out = model(spec.inputs[2:5])
    raw = model.__dict__["_attest_forward"](model, spec.call.probe["image"][2:5],
                                            spec.call.probe["tab"][2:5])  # fmt: skip
    # column 0: F = the labelled class's logit + the risk; then both heads
    labels = spec.call.probe["cls"][2:5]
    by_hand = raw[0].gather(1, labels.view(-1, 1))[:, 0] + raw[1][:, 0]
    torch.testing.assert_close(out[:, 0], by_hand)
    torch.testing.assert_close(out[:, 1:4], raw[0])
    assert spec.loss_fn is not None and spec.labels is not None
    expected = torch.nn.functional.cross_entropy(raw[0], labels) + torch.nn.functional.mse_loss(
        raw[1][:, 0], spec.call.probe["risk"][2:5]
    )
    torch.testing.assert_close(spec.loss_fn(out, spec.labels[2:5]), expected)


@pytest.mark.slow
def test_two_inputs_two_heads_certify(tmp_path: Path) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    heads:
      diagnosis: {output: 0, target: label, loss: model:cls_loss, labels: cls}
      risk: {output: 1, loss: model:risk_loss, labels: risk}
    """
    path = _folder(tmp_path, FUSION, FUSION_TRAIN, spec_text)
    failing = _failing(path)
    assert {rule for rule, _, _ in failing} <= IG_READINGS, failing


def test_second_head_of_a_tuple_is_not_a_dead_branch(tmp_path: Path) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    output: 0
    target: label
    """
    from attest.collection.context import CollectContext
    from attest.collection.gradients import flow

    path = _folder(tmp_path, FUSION,
                   FUSION_TRAIN + "probe['target'] = cls.clone()\n", spec_text)  # fmt: skip
    result = flow.run(CollectContext(spec=load_spec(path)))
    by_name = {i.subject.name: i for i in result.items if i.subject.kind == "parameter"}
    assert by_name["risk.weight"].status == "pass"
    assert by_name["risk.weight"].metrics["reason_kind"] == "unselected_output"
    assert by_name["cls.weight"].status == "pass" and by_name["cls.weight"].metrics["has_grad"]
    _assert_consistent(result)


BERT = """
from transformers import BertConfig, BertForSequenceClassification

def build():
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=16, num_labels=2)
    return BertForSequenceClassification(config)
"""

BERT_TRAIN = """
g = torch.Generator().manual_seed(1)
n, length = 8, 10
ids = torch.randint(3, 40, (n, length), generator=g)
# every example is padded: transformers skips the mask when it is all ones (another path)
lengths = torch.tensor([9, 7, 5, 9, 8, 6, 8, 4])
mask = (torch.arange(length)[None] < lengths[:, None]).long()
ids = ids * mask
target = (ids[:, 0] > 20).long()
opt = torch.optim.Adam(model.parameters(), 1e-3)
model.train()
for _ in range(20):
    loss = torch.nn.functional.cross_entropy(
        model(input_ids=ids, attention_mask=mask).logits, target)
    opt.zero_grad(); loss.backward(); opt.step()
probe.update(input_ids=ids, attention_mask=mask, target=target)
"""

BERT_SPEC = """
inputs:
  probe: probe.safetensors
  input_ids: {role: embedded, kwarg: input_ids, embedding: bert.embeddings.word_embeddings}
  attention_mask: {role: fixed, kwarg: attention_mask}
output: logits
target: label
"""


@pytest.mark.slow
def test_bert_token_ids_and_attention_mask_certify(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    path = _folder(tmp_path, BERT, BERT_TRAIN, BERT_SPEC)
    spec = load_spec(path)
    assert spec.call is not None
    # the ids are never cast: the probe keeps them int64, x holds their embeddings
    assert spec.call.probe["input_ids"].dtype == torch.int64
    assert spec.inputs.shape == (8, 10 * 32 + 1)
    kept: dict[str, Any] = {}
    failing = _failing(path, kept)
    evidence = kept["evidence"]
    # with the mask held fixed the path is smooth: completeness to IG's tolerance
    assert evidence.checks["ig_completeness"].summary["max_completeness_rel_error"] < 1e-3
    # attributions per token: the embeddings' attributions summed over the hidden size
    named = evidence.attributions["named_inputs"]
    assert [(n["name"], n["role"]) for n in named] == [("input_ids", "embedded")]
    per_token = torch.tensor(named[0]["per_token"], dtype=torch.float64)
    assert per_token.shape == (8, 10)
    torch.testing.assert_close(per_token.sum(dim=1).tolist(), named[0]["total"])
    # BERT's word embeddings have padding_idx 0: PyTorch gives the pad row no gradient by
    # design, which gradcheck's central differences on the embedding operator do not know
    # (issue 34's gradcheck item, fixed in attest/collection/gradients/)
    unexplained = [
        f for f in failing if not (f[0] == "gradcheck.operators" and "word_embeddings" in f[1])
    ]
    assert not unexplained, unexplained


REGRESSION = """
import torch
from torch import nn
import torch.nn.functional as F

def build():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))

def loss(out, y):
    return F.mse_loss(out.squeeze(1), y)
"""

REGRESSION_TRAIN = """
g = torch.Generator().manual_seed(1)
x = torch.randn(8, 6, generator=g)
y = x[:, 0] - 0.5 * x[:, 1]
opt = torch.optim.Adam(model.parameters(), 1e-2)
for _ in range(60):
    l = loss(model(x), y)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, target=y)
"""


@pytest.mark.slow
def test_regression_with_float_targets_certifies(tmp_path: Path) -> None:
    path = _folder(tmp_path, REGRESSION, REGRESSION_TRAIN,
                   "inputs: {probe: probe.safetensors}\nloss: model:loss\nbaseline: mean\n")  # fmt: skip
    spec = load_spec(path)
    assert spec.call is None and spec.labels is not None and spec.labels.dtype == torch.float32
    # float64 output, float32 targets: the loss gets them in the output's dtype
    out = spec.build_model().double()(spec.inputs.double())
    assert spec.loss_fn is not None and spec.loss_fn(out, spec.labels).dtype == torch.float64
    assert {rule for rule, _, _ in _failing(path)} <= IG_READINGS


def test_float_targets_without_a_loss_are_refused(tmp_path: Path) -> None:
    path = _folder(tmp_path, REGRESSION, REGRESSION_TRAIN, "inputs: {probe: probe.safetensors}\n")
    with pytest.raises(InputError, match="expected integer class labels without a loss"):
        load_spec(path)


MULTILABEL = """
import torch
from torch import nn
import torch.nn.functional as F

def build():
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 14))

def loss(out, y):
    return F.binary_cross_entropy_with_logits(out, y)
"""

MULTILABEL_TRAIN = """
g = torch.Generator().manual_seed(1)
x = torch.randn(8, 10, generator=g)
y = (torch.randn(8, 14, generator=g) + x[:, :1] > 0).float()
opt = torch.optim.Adam(model.parameters(), 1e-2)
for _ in range(60):
    l = loss(model(x), y)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, target=y)
"""


@pytest.mark.slow
def test_fourteen_label_multilabel_bce_certifies(tmp_path: Path) -> None:
    path = _folder(tmp_path, MULTILABEL, MULTILABEL_TRAIN,
                   "inputs: {probe: probe.safetensors}\nloss: model:loss\ntarget: 3\n")  # fmt: skip
    spec = load_spec(path)
    assert spec.labels is not None and spec.labels.shape == (8, 14)
    assert spec.labels.is_floating_point()
    # every rule passes but one true finding: label 3 is present in 6 of the 8 training
    # examples, and the model's sigmoid for it at the zero baseline is 0.809 (its prior), so
    # the baseline reads as the label (>= 0.75); read as a softmax across the 14 labels'
    # logits it passed, a reading of no label (docs/architectures.md, "Fourth clean sweep")
    failing = _failing(path)
    assert failing and all(rule == "ig_baseline.neutral" for rule, _, _ in failing), failing
    assert all("p = 0.809" in message for _, _, message in failing), failing


ENCODER = """
import torch
from torch import nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, 2)

    def forward(self, x, padding_mask):
        h = self.encoder(self.proj(x), src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))

def build():
    return Encoder()
"""

ENCODER_TRAIN = """
g = torch.Generator().manual_seed(1)
x = torch.randn(8, 6, 4, generator=g)
lengths = torch.tensor([6, 4, 5, 3, 6, 2, 5, 4])
padding_mask = torch.arange(6)[None] >= lengths[:, None]
target = (x[:, 0, 0] > 0).long()
opt = torch.optim.Adam(model.parameters(), 1e-2)
for _ in range(30):
    l = torch.nn.functional.cross_entropy(model(x, padding_mask), target)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, padding_mask=padding_mask, target=target)
"""

ENCODER_SPEC = """
inputs:
  probe: probe.safetensors
  x: {role: attributed, arg: 0}
  padding_mask: {role: fixed, arg: 1}
target: label
"""


@pytest.mark.slow
def test_transformer_encoder_with_fixed_padding_mask_certifies(tmp_path: Path) -> None:
    path = _folder(tmp_path, ENCODER, ENCODER_TRAIN, ENCODER_SPEC)
    spec = load_spec(path)
    assert spec.call is not None
    # the mask stays bool and is never integrated: the all-zero baseline gives finite F
    assert spec.call.probe["padding_mask"].dtype == torch.bool
    baseline = spec.inputs.clone()
    baseline[:, :-1] = 0
    assert bool(torch.isfinite(spec.build_model()(baseline)).all())
    assert {rule for rule, _, _ in _failing(path)} <= IG_READINGS


SPEC_ERRORS = [
    ("image: {role: attributed}", "exactly one of arg"),
    ("ids: {role: embedded, arg: 0}", "needs embedding"),
    ("m: {role: fixed, arg: 0, baseline: zero}", "has no baseline"),
    ("m: {role: fixed, arg: 0}", "at least one input must be role: attributed"),
    ("a: {arg: 0}\n  b: {arg: 2}", "without gaps"),
]


@pytest.mark.parametrize(("inputs", "text"), SPEC_ERRORS, ids=[t for _, t in SPEC_ERRORS])
def test_named_input_mistakes_are_config_errors(tmp_path: Path, inputs: str, text: str) -> None:
    from attest.spec import parse_spec_file

    path = tmp_path / "attest.yaml"
    path.write_text(
        "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"
        f"inputs:\n  probe: p.safetensors\n  {inputs}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=text):
        parse_spec_file(path)


def test_integer_ids_as_an_attributed_input_are_refused(tmp_path: Path) -> None:
    train = BERT_TRAIN.replace("model.train()", "model.train()\nbreak_early = True")
    spec_text = BERT_SPEC.replace(
        "{role: embedded, kwarg: input_ids, embedding: bert.embeddings.word_embeddings}",
        "{role: attributed, kwarg: input_ids}",
    )
    pytest.importorskip("transformers")
    with pytest.raises(InputError, match="role: attributed but probe key 'input_ids'"):
        load_spec(_folder(tmp_path, BERT, train.replace("range(20)", "range(0)"), spec_text))


def test_check_gradients_takes_a_tuple_and_keeps_integer_inputs(tmp_path: Path) -> None:
    from attest.testing.gradient_checks import check_gradients

    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(ENCODER), namespace)
    torch.manual_seed(0)
    model = namespace["build"]()
    x = torch.randn(4, 6, 4)
    mask = torch.arange(6)[None] >= torch.tensor([6, 4, 5, 3])[:, None]
    result = check_gradients(model, (x, mask), checks=("gradient_flow", "numerics"))
    assert result.passed, result.summary()


def test_export_takes_the_named_inputs_not_the_packed_tensor(tmp_path: Path) -> None:
    import onnx

    from attest.collection.context import CollectContext
    from attest.collection.export import check

    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
      mask: {key: cls, role: fixed, kwarg: unused}
    heads:
      diagnosis: {output: 0, target: label, labels: cls}
      risk: {output: 1}
    export: onnx
    """
    source = FUSION.replace(
        "def forward(self, image, tabular):", "def forward(self, image, tabular, unused=None):"
    )
    ctx = CollectContext(spec=load_spec(_folder(tmp_path, source, FUSION_TRAIN, spec_text)))
    ctx.output_dir = tmp_path / "out"
    result = check.run(ctx)[0]
    assert result.status == "computed" and result.summary["outputs"] == 2, result
    assert all(i.status == "pass" for i in result.items), result.items
    graph = onnx.load(str(tmp_path / "out" / "model.onnx")).graph
    names = [i.name for i in graph.input]
    assert names[:2] == ["image", "tabular"], names
    assert ctx.export is not None


DICT_OUTPUT = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.risk = nn.Linear(6, 2)
        self.grade = nn.Linear(6, 3)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return {"heads": {"risk": self.risk(h), "grade": self.grade(h)}}

def build():
    return Net()

def score(out, batch):
    # F: the risk logit difference, weighted per example by the probe's "weight"
    return (out[:, 1] - out[:, 0]) * batch["weight"]
"""

DICT_TRAIN = """
g = torch.Generator().manual_seed(1)
probe.update(x=torch.randn(6, 4, generator=g), weight=torch.tensor([1.0, 2, 3, 4, 5, 6]))
"""


def test_dotted_output_path_and_a_target_function(tmp_path: Path) -> None:
    spec_text = "inputs: {probe: probe.safetensors}\noutput: heads.risk\ntarget: model:score\n"
    spec = load_spec(_folder(tmp_path, DICT_OUTPUT, DICT_TRAIN, spec_text))
    assert spec.call is not None and spec.call.computes_f and spec.target == 0
    model = spec.build_model()
    x = spec.call.probe["x"]
    risk = model.__dict__["_attest_forward"](model, x)["heads"]["risk"]
    by_hand = (risk[:, 1] - risk[:, 0]) * torch.tensor([1.0, 2, 3, 4, 5, 6])
    # a sub-batch in another order: each example keeps its own weight (its probe row)
    order = torch.tensor([4, 1, 5])
    out = model(spec.inputs[order])
    torch.testing.assert_close(out[:, 0], by_hand[order])
    torch.testing.assert_close(out[:, 1:], risk[order])
    described = spec.call.describe()
    assert described["heads"][0]["output"] == "heads.risk"
    assert described["heads"][0]["target"] == "model:score"


def test_a_wrong_output_path_names_what_is_there(tmp_path: Path) -> None:
    spec_text = "inputs: {probe: probe.safetensors}\noutput: heads.size\n"
    with pytest.raises(ConfigError, match=r"no 'heads.size' in keys \['risk', 'grade'\]"):
        load_spec(_folder(tmp_path, DICT_OUTPUT, DICT_TRAIN, spec_text))


def test_check_gradients_refuses_integer_ids_without_a_role_and_embeds_them_with_one() -> None:
    from torch import nn

    from attest.testing.gradient_checks import check_gradients

    class Bag(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(12, 4)
            self.head = nn.Linear(4, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(torch.tanh(self.emb(ids)).mean(1))

    torch.manual_seed(0)
    ids = torch.randint(0, 12, (3, 5))
    with pytest.raises(
        InputError, match="integer inputs such as token ids have no gradient"
    ) as info:
        check_gradients(Bag(), ids, checks=("gradient_flow",))
    assert "'role': 'embedded'" in (info.value.hint or "")
    result = check_gradients(
        Bag(),
        ids,
        roles={"arg0": {"role": "embedded", "embedding": "emb"}},
        checks=("gradient_flow",),
    )
    assert result.passed, result.summary()
    flow = result.evidence.checks["gradient_flow"]
    emb = next(i for i in flow.items if i.subject.name == "emb.weight")
    assert emb.status == "pass" and emb.metrics["has_grad"]


GRU = """
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

class Risk(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 8, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)
        return self.head(h[-1])

def build():
    return Risk()
"""

GRU_TRAIN = """
g = torch.Generator().manual_seed(1)
lengths = torch.tensor([7, 5, 3, 7, 5, 3, 7, 5])
x = torch.randn(8, 7, 3, generator=g) * (torch.arange(7)[None, :, None] < lengths[:, None, None])
target = (x[:, 0, 0] > 0).long()
opt = torch.optim.Adam(model.parameters(), 1e-2)
for _ in range(30):
    l = torch.nn.functional.cross_entropy(model(x, lengths), target)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, lengths=lengths, target=target)
"""

GRU_SPEC = """
inputs:
  probe: probe.safetensors
  x: {role: attributed, arg: 0}
  lengths: {role: fixed, arg: 1}
target: label
export: onnx
"""


def test_packed_sequences_are_judged_per_length_with_dynamic(tmp_path: Path) -> None:
    from attest.cli.collect import _summary_lines

    plain = _folder(tmp_path / "plain", GRU, GRU_TRAIN, GRU_SPEC)
    evidence = collect(plain)
    # without dynamic: examples of other lengths take other paths, set by the fixed lengths
    # alone (each swap of lengths takes the other's path), so topology passes and says so
    topology = evidence.checks["topology"].summary
    assert topology["diverging_inputs"] == 0 and topology["paths_set_by_fixed_inputs"] == 5
    line = next(t for t in _summary_lines(evidence, plain) if t.strip().startswith("determinism"))
    assert "topology failed" not in line and "(0 fail, 0 warn" in line, line

    dynamic = _folder(tmp_path / "dynamic", GRU, GRU_TRAIN, GRU_SPEC + "dynamic: [lengths]\n")
    spec = load_spec(dynamic)
    assert spec.signatures == [0, 1, 2, 0, 1, 2, 0, 1]
    assert spec.signature_labels == ["lengths=7", "lengths=5", "lengths=3"]
    evidence = collect(dynamic)
    topology = evidence.checks["topology"]
    assert topology.summary["diverging_inputs"] == 0 and topology.summary["shape_signatures"] == 3
    determinism = evidence.checks["determinism"]
    assert any(i.status == "pass" for i in determinism.items)
    export = evidence.checks["export"]
    # pack_padded_sequence does not export: said, with the exporter's reason, no probe offered
    assert export.status == "not_applicable" and "no server-side probe" in (export.reason or "")
    assert evidence.export is None


def test_a_head_reading_float_targets_as_classes_is_refused(tmp_path: Path) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    heads:
      diagnosis: {output: 0, target: label, labels: risk}
    """
    with pytest.raises(InputError, match="one non-negative integer class per example"):
        load_spec(_folder(tmp_path, FUSION, FUSION_TRAIN, spec_text))


def test_every_head_has_a_loss_or_none_does(tmp_path: Path) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    heads:
      diagnosis: {output: 0, target: label, loss: model:cls_loss, labels: cls}
      risk: {output: 1}
    """
    with pytest.raises(ConfigError, match="give every head a loss"):
        load_spec(_folder(tmp_path, FUSION, FUSION_TRAIN, spec_text))


def test_an_argmax_head_reads_the_class_predicted_at_the_input_all_along_the_path(
    tmp_path: Path,
) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    heads:
      diagnosis: {output: 0}
    """
    spec = load_spec(_folder(tmp_path, FUSION, FUSION_TRAIN, spec_text))
    assert spec.call is not None
    model = spec.build_model()
    raw = model.__dict__["_attest_forward"](model, spec.call.probe["image"], spec.call.probe["tab"])
    predicted = raw[0].argmax(dim=1)
    head = spec.call.heads[0]
    assert head.classes is not None and torch.equal(head.classes, predicted)
    baseline = spec.inputs.clone()
    baseline[:, :-1] = 0  # the zero baseline, each example's row kept
    at_baseline = model.__dict__["_attest_forward"](
        model, torch.zeros_like(spec.call.probe["image"]), torch.zeros_like(spec.call.probe["tab"])
    )[0]
    torch.testing.assert_close(
        model(baseline)[:, 0], at_baseline.gather(1, predicted.view(-1, 1))[:, 0]
    )


@pytest.mark.slow
def test_training_checks_run_through_the_named_call(tmp_path: Path) -> None:
    source = FUSION + (
        "\ndef make_optimizer(params):\n    return torch.optim.SGD(params, lr=0.01)\n"
    )
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    heads:
      diagnosis: {output: 0, target: label, loss: model:cls_loss, labels: cls}
      risk: {output: 1, loss: model:risk_loss, labels: risk}
    training:
      optimizer: model:make_optimizer
      autocast: bfloat16
      checkpoint: ["img"]
      batch_sizes: [1, 4]
    """
    evidence = collect(_folder(tmp_path, source, FUSION_TRAIN, spec_text))
    for check in ("mixed_precision", "recompute", "batch_invariance", "resume", "accumulation"):
        result = evidence.checks[check]
        assert result.status == "computed", (check, result.reason)
        bad = [(i.status, i.message) for i in result.items if i.status in ("fail", "error")]
        assert not bad, (check, bad)


def test_ig_baseline_judges_each_head_as_the_output_it_is(tmp_path: Path) -> None:
    spec_text = """
    inputs:
      probe: probe.safetensors
      image: {role: attributed, arg: 0}
      tabular: {key: tab, role: attributed, arg: 1}
    heads:
      diagnosis: {output: 0, target: label, labels: cls}
      risk: {output: 1}
    """
    runners = [
        "attest.collection.profile.topology:run",
        "attest.collection.profile.profiler:run",
        "attest.collection.ig.checks:run",
    ]
    evidence = collect(_folder(tmp_path, FUSION, FUSION_TRAIN, spec_text), runners=runners)
    items = evidence.checks["ig_baseline"].items
    assert len(items) == 8
    for item in items:
        # the classification head by its softmax, the regression head by |F(b)| / |F(x)|
        assert item.message.startswith("diagnosis: ") and "; risk: |F(baseline)| is" in item.message
        assert "diagnosis.baseline_entropy_ratio" in item.metrics
        assert "risk.baseline_output_ratio" in item.metrics
    assert evidence.checks["ig_completeness"].summary["max_completeness_rel_error"] < 1e-2


TWO_HEADS_ONE_INPUT = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.cls = nn.Linear(6, 3)
        self.aux = nn.Linear(6, 1)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.cls(h), self.aux(h)

def build():
    return Net()
"""


def test_the_single_input_form_does_not_call_a_second_output_dead(tmp_path: Path) -> None:
    from attest.collection.context import CollectContext
    from attest.collection.gradients import flow

    train = "probe.update(x=torch.randn(4, 4, generator=torch.Generator().manual_seed(1)))\n"
    spec = load_spec(
        _folder(tmp_path, TWO_HEADS_ONE_INPUT, train, "inputs: {probe: probe.safetensors}\n")
    )
    assert spec.call is None  # unchanged single-input form: F reads the first tensor
    result = flow.run(CollectContext(spec=spec))
    by_name = {i.subject.name: i for i in result.items if i.subject.kind == "parameter"}
    assert by_name["aux.weight"].status == "pass"
    assert by_name["aux.weight"].metrics["reason_kind"] == "unselected_output"
    assert by_name["body.weight"].metrics["has_grad"]
    _assert_consistent(result)


def _assert_consistent(result: Any) -> None:
    """The policy's consistency rule for gradient_flow accepts what the collector claimed: an
    unselected output's parameter passing by design is not an inconsistency (evaluate raised
    InconsistentEvidence on every model whose `output:` left a head unread)."""
    from attest.evidence.claims_gradients import gradient_flow
    from attest.evidence.consistency import ClaimChecker

    claims = ClaimChecker(result)
    gradient_flow(claims, None)  # type: ignore[arg-type]  # the rule reads no evidence
    assert not claims.found, [f.describe() for f in claims.found]
