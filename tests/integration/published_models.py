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
