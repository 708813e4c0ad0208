"""Models of the fourth clean sweep (docs/architectures.md, "Fourth clean sweep") held as
cases by tests/integration/test_clean_sweep.py: each its model.py source, its training script
and the spec below ``model:``, written as a clinical team would (no wrapper code)."""

from __future__ import annotations

# dann-gradient-reversal
DANN = """
import torch
from torch import nn

class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)
    @staticmethod
    def backward(ctx, grad):
        return -ctx.lam * grad, None

class DANN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.label_head = nn.Linear(16, 2)
        self.domain_head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
    def forward(self, x):
        h = self.features(x)
        return {"label": self.label_head(h), "domain": self.domain_head(GradReverse.apply(h, 0.5))}

def build():
    return DANN()
"""

DANN_TRAIN = """
g = torch.Generator().manual_seed(1)
n = 128
x = torch.randn(n, 10, generator=g)
domain = (torch.rand(n, generator=g) > 0.5).long()
x[:, 5] += 1.5 * domain
label = (x[:, 0] + x[:, 1] > 0).long()
opt = torch.optim.Adam(model.parameters(), 3e-3)
model.train()
for _ in range(200):
    out = model(x)
    l = torch.nn.functional.cross_entropy(out["label"], label) + torch.nn.functional.cross_entropy(out["domain"], domain)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, target=label)
"""

DANN_SPEC = """
inputs: {probe: probe.safetensors}
output: label
target: label
"""

# heteroscedastic-nll
HETEROSCEDASTIC = """
import torch
from torch import nn
import torch.nn.functional as F

class MeanVar(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
        self.mean = nn.Linear(32, 1)
        self.log_var = nn.Linear(32, 1)

    def forward(self, x):
        h = self.body(x)
        return torch.cat([self.mean(h), self.log_var(h)], dim=-1)   # (N, 2): mean, log variance

def build():
    return MeanVar()

def loss(out, y):
    return F.gaussian_nll_loss(out[:, 0], y, out[:, 1].exp())
"""

HETEROSCEDASTIC_TRAIN = """
g = torch.Generator().manual_seed(1)
n = 128
x = torch.randn(n, 6, generator=g)
y = x[:, 0] - 0.5 * x[:, 1] + (0.1 + 0.5 * x[:, 2].abs()) * torch.randn(n, generator=g)
opt = torch.optim.Adam(model.parameters(), 3e-3)
model.train()
for _ in range(300):
    l = loss(model(x), y)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, target=y)
"""

HETEROSCEDASTIC_SPEC = """
inputs: {probe: probe.safetensors}
loss: model:loss
target: 0
"""

# ctc-speech
CTC_SPEECH = """
import math

import torch
from torch import nn
import torch.nn.functional as F

class Speech(nn.Module):
    def __init__(self, feats=13, classes=6):
        super().__init__()
        self.conv = nn.Conv1d(feats, 24, 3, padding=1)
        self.rnn = nn.GRU(24, 24, batch_first=True, bidirectional=True)
        self.out = nn.Linear(48, classes)
    def forward(self, x):                      # (N, T, feats)
        h = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        h, _ = self.rnn(h)
        return self.out(h).log_softmax(-1)     # (N, T, C)

def build():
    return Speech()

def loss(logp, labels):
    # labels: (N, S) with 0 = blank padding; every utterance uses all T frames
    n, t, _ = logp.shape
    lengths = (labels > 0).sum(1)
    return F.ctc_loss(logp.transpose(0, 1), labels, torch.full((n,), t, dtype=torch.long), lengths,
                      blank=0, zero_infinity=True)

def transcript_score(logp, batch):
    # F: the log-likelihood of the transcript (negative CTC loss per utterance), per frame,
    # plus log C: 0 for a model with no preference
    labels = batch["target"].to(logp.device)
    n, t, c = logp.shape
    lengths = (labels > 0).sum(1)
    nll = F.ctc_loss(logp.transpose(0, 1), labels, torch.full((n,), t, dtype=torch.long), lengths,
                     blank=0, reduction="none", zero_infinity=True)
    return -nll / t + math.log(c)
"""

CTC_SPEECH_TRAIN = """
g = torch.Generator().manual_seed(1)
n, T, S = 64, 20, 4
labels = torch.randint(1, 6, (n, S), generator=g)
labels[n // 2:, 3] = 0
x = 0.3 * torch.randn(n, T, 13, generator=g)
for i in range(S):
    x[:, i * 5:(i * 5) + 4, :] += torch.nn.functional.one_hot(labels[:, i], 13)[:, None, :].float() * (labels[:, i] > 0)[:, None, None]
opt = torch.optim.Adam(model.parameters(), 1e-2)
model.train()
for _ in range(150):
    l = loss(model(x), labels)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=x, target=labels)
"""

CTC_SPEECH_SPEC = """
inputs: {probe: probe.safetensors}
loss: model:loss
target: model:transcript_score
"""

# landmark-heatmaps
LANDMARK_HEATMAPS = """
import torch
from torch import nn
import torch.nn.functional as F

class HeatmapNet(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(1, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(),
                                  nn.Conv2d(12, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                nn.Conv2d(16, 12, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(12, k, 1)

    def forward(self, x):
        return self.head(self.up(self.down(x)))

def build():
    return HeatmapNet()

def loss(out, heat):
    return F.mse_loss(out, heat)
"""

LANDMARK_HEATMAPS_TRAIN = """
g = torch.Generator().manual_seed(1)
n, H = 64, 16
pts = torch.randint(2, H - 2, (n, 3, 2), generator=g).float()
yy, xx = torch.meshgrid(torch.arange(H).float(), torch.arange(H).float(), indexing="ij")
heat = torch.exp(-((yy - pts[..., 0, None, None]) ** 2 + (xx - pts[..., 1, None, None]) ** 2) / 4.0)
img = heat.sum(1, keepdim=True) + 0.1 * torch.randn(n, 1, H, H, generator=g)
opt = torch.optim.Adam(model.parameters(), 3e-3)
model.train()
for _ in range(150):
    l = loss(model(img), heat)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(x=img, target=heat)
"""

LANDMARK_HEATMAPS_SPEC = """
inputs: {probe: probe.safetensors}
loss: model:loss
target: 1
"""


# textcnn-maxpool
TEXT_CNN = """
import torch
from torch import nn

class TextCNN(nn.Module):
    def __init__(self, v=50, d=16):
        super().__init__()
        self.emb = nn.Embedding(v, d, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(d, 12, k) for k in (2, 3, 4))
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(36, 3)
    def forward(self, ids):
        e = self.emb(ids).transpose(1, 2)
        h = [torch.relu(c(e)).max(dim=2).values for c in self.convs]
        return self.fc(self.drop(torch.cat(h, 1)))

def build():
    return TextCNN()
"""

TEXT_CNN_TRAIN = """
g = torch.Generator().manual_seed(1)
n, L = 128, 14
ids = torch.randint(5, 50, (n, L), generator=g)
lengths = torch.randint(5, L + 1, (n,), generator=g)
ids = ids * (torch.arange(L)[None] < lengths[:, None])
label = ((ids == 7).any(1) | (ids == 8).any(1)).long() + ((ids == 9).any(1)).long()
opt = torch.optim.Adam(model.parameters(), 3e-3)
model.train()
for _ in range(200):
    l = torch.nn.functional.cross_entropy(model(ids), label)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(ids=ids, target=label)
"""

TEXT_CNN_SPEC = """
inputs:
  probe: probe.safetensors
  ids: {role: embedded, arg: 0, embedding: emb}
target: label
"""
