"""Published architectures, rebuilt small, for false-alarm tests of the whole collect pipeline.

None of these is one of our examples: they stand in for "a published architecture you were
never told about". Each factory builds a small but structurally faithful instance (ResNet basic
blocks with in-place ReLU, a pre-norm ViT encoder, MONAI's UNet and DenseNet, a 3D SegResNet).
Weights are seeded initializations saved to a file: the checks under test are about the
program's gradients, which a clean architecture gets right whatever its weights.
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock (He et al. 2016), in-place ReLU included."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    """ResNet stem (conv 7x7 s2, max-pool 3x3 s2), two stages, global average pool, fc."""

    def __init__(self, num_classes: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class TinyViT(nn.Module):
    """Vision Transformer (Dosovitskiy et al. 2021): patch embedding, class token, pre-norm encoder."""

    def __init__(
        self, image: int = 16, patch: int = 4, dim: int = 16, depth: int = 2, classes: int = 3
    ) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(1, dim, patch, patch)
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            dim,
            nhead=2,
            dim_feedforward=2 * dim,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)
        tokens = torch.cat([cls, tokens], dim=1) + self.pos_embed
        return self.head(self.norm(self.encoder(tokens))[:, 0])


def tiny_resnet() -> nn.Module:
    return TinyResNet()


def tiny_vit() -> nn.Module:
    return TinyViT()


class ConvNeXtBlock(nn.Module):
    """ConvNeXt block (Liu et al. 2022): depthwise 7x7, channels-last LayerNorm, inverted MLP
    with GELU, layer scale, residual."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-1 * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class TinyConvNeXt(nn.Module):
    """Patchify stem, two ConvNeXt blocks, global average pool, LayerNorm, linear head."""

    def __init__(self, dim: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, dim, 4, 4)
        self.blocks = nn.Sequential(ConvNeXtBlock(dim), ConvNeXtBlock(dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x)).mean(dim=(2, 3))
        return self.head(self.norm(y))


class InvertedResidual(nn.Module):
    """MobileNetV2/V3 inverted residual: expand 1x1, depthwise 3x3, project 1x1, ReLU6/Hardswish."""

    def __init__(self, dim: int, expand: int = 2) -> None:
        super().__init__()
        hidden = dim * expand
        self.block = nn.Sequential(
            nn.Conv2d(dim, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.Hardswish(),
            nn.Conv2d(hidden, dim, 1, bias=False),
            nn.BatchNorm2d(dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class TinyMobileNet(nn.Module):
    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish()
        )
        self.blocks = nn.Sequential(InvertedResidual(8), InvertedResidual(8))
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class GRUClassifier(nn.Module):
    """A recurrent sequence classifier (e.g. over per-slice features): GRU, last state, linear."""

    def __init__(self, features: int = 4, hidden: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.rnn = nn.GRU(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def tiny_convnext() -> nn.Module:
    return TinyConvNeXt()


def tiny_mobilenet() -> nn.Module:
    return TinyMobileNet()


def gru_classifier() -> nn.Module:
    return GRUClassifier()


class SpectralConv2d(nn.Module):
    """The Fourier layer of the Fourier neural operator (Li et al. 2021), as in the reference
    code: rfft2, complex weights on the lowest modes, irfft2; the spectrum is allocated with a
    hard-coded ``dtype=torch.cfloat``, so part of a float64 instance still runs in float32."""

    def __init__(self, cin: int, cout: int, modes: int) -> None:
        super().__init__()
        self.modes = modes
        scale = 1 / (cin * cout)
        self.w1 = nn.Parameter(scale * torch.randn(cin, cout, modes, modes, dtype=torch.cfloat))
        self.w2 = nn.Parameter(scale * torch.randn(cin, cout, modes, modes, dtype=torch.cfloat))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        m = self.modes
        xf = torch.fft.rfft2(x)
        out = torch.zeros(n, self.w1.shape[1], h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


class TinyFNO(nn.Module):
    """Two Fourier layers with pointwise skips, GELU, a 2-class per-pixel output (the operator
    networks used for MRI reconstruction have this shape)."""

    def __init__(self, width: int = 8, modes: int = 3) -> None:
        super().__init__()
        self.lift = nn.Conv2d(1, width, 1)
        self.spectral = nn.ModuleList([SpectralConv2d(width, width, modes) for _ in range(2)])
        self.pointwise = nn.ModuleList([nn.Conv2d(width, width, 1) for _ in range(2)])
        self.proj = nn.Conv2d(width, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lift(x)
        for spectral, pointwise in zip(self.spectral, self.pointwise, strict=True):
            h = nn.functional.gelu(spectral(h) + pointwise(h))
        return self.proj(h)


class CausalSelfAttention(nn.Module):
    """minGPT's attention (Karpathy): a causal mask from a tril buffer, written as -inf with
    masked_fill before the softmax."""

    def __init__(self, dim: int = 16, heads: int = 2, block: int = 8) -> None:
        super().__init__()
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.n_head = heads
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = (
            z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            for z in self.c_attn(x).split(c, dim=2)
        )
        att = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = nn.functional.softmax(att, dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPTClassifier(nn.Module):
    """minGPT blocks over a projected sequence of features; the last position classifies."""

    def __init__(self, features: int = 4, dim: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.wte = nn.Linear(features, dim)
        self.wpe = nn.Parameter(torch.randn(1, 8, dim) * 0.02)
        self.blocks = nn.Sequential(GPTBlock(dim), GPTBlock(dim))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.wte(x) + self.wpe[:, : x.shape[1]]
        return self.head(self.ln_f(self.blocks(h))[:, -1])


def tiny_fno() -> nn.Module:
    return TinyFNO()


def tiny_gpt() -> nn.Module:
    return TinyGPTClassifier()
