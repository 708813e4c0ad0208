"""Planted defects (and clean counterparts) of the recompute and resume checks, as model.py
sources for spec folders (``make_spec``): each defect is flagged by its check and not by the
other one."""

from __future__ import annotations

COMMON = """
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def loss(output, target):
    return nn.functional.cross_entropy(output, target)


def make_optimizer(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def make_adam(params):
    return torch.optim.Adam(params, lr=0.01)


class Block(nn.Module):
    def __init__(self, reentrant=False, preserve=True, norm=False):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.3)
        self.bn = nn.BatchNorm1d(16) if norm else nn.Identity()
        self.reentrant, self.preserve = reentrant, preserve

    def body(self, h):
        return torch.tanh(self.bn(self.drop(self.fc(h))))

    def forward(self, h):
        return checkpoint(
            self.body, h, use_reentrant=self.reentrant, preserve_rng_state=self.preserve
        )


class Net(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.blocks = nn.ModuleList(blocks)
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)
"""

# clean: a reentrant and a non-reentrant checkpointed block, dropout with its RNG preserved
CHECKPOINTED = (
    COMMON
    + """
def build():
    return Net([Block(reentrant=True), Block(reentrant=False)])
"""
)

# (a) dropout in a checkpointed block whose RNG state is not preserved
DROPOUT_RNG_LOST = (
    COMMON
    + """
def build():
    return Net([Block(reentrant=False), Block(reentrant=False, preserve=False)])
"""
)

# (b) BatchNorm in a checkpointed block: its running statistics are updated twice
BATCHNORM_RECOMPUTED = (
    COMMON
    + """
def build():
    return Net([Block(reentrant=True, norm=True)])
"""
)

# clean, checkpointed by the spec (training.checkpoint: ["encoder.*"]) rather than the model
ENCODER = (
    COMMON
    + """
class Encoded(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.encoder = nn.Sequential(
            nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.2), nn.Tanh()),
            nn.Sequential(nn.Linear(16, 16), nn.Tanh()),
        )
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        return self.out(self.encoder(self.inp(x)))


def build():
    return Encoded()
"""
)

# clean resume: an MLP with dropout (the RNG is part of the checkpoint), SGD momentum or Adam
MLP = (
    COMMON
    + """
def build():
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 3))
"""
)

# (c) a running statistic kept as a plain attribute (not register_buffer): not in state_dict
PLAIN_ATTRIBUTE = (
    COMMON
    + """
class RunningCenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.out = nn.Linear(16, 3)
        self.running = torch.zeros(16)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        if self.training:
            self.running = 0.5 * self.running + 0.5 * h.detach().mean(0)
        return self.out(h - self.running)


def build():
    return RunningCenter()
"""
)

# (d) an optimizer whose momentum lives in an attribute, not in self.state: not in state_dict
ATTRIBUTE_OPTIMIZER = (
    COMMON
    + """
class AttributeMomentum(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, {"lr": lr, "momentum": momentum})
        self.momentum_buf = {}

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.momentum_buf.get(p)
                if buf is None:
                    buf = p.grad.clone()
                else:
                    buf.mul_(group["momentum"]).add_(p.grad)
                self.momentum_buf[p] = buf
                p.add_(buf, alpha=-group["lr"])


def make_attribute_optimizer(params):
    return AttributeMomentum(params)


def build():
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
"""
)

# (a') a hand-written recomputation (a custom autograd.Function) that does not restore the RNG
HANDWRITTEN = (
    COMMON
    + """
class Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, block):
        ctx.block = block
        ctx.save_for_backward(h)
        with torch.no_grad():
            return block.body(h)

    @staticmethod
    def backward(ctx, grad):
        (h,) = ctx.saved_tensors
        with torch.enable_grad():
            h = h.detach().requires_grad_(True)
            out = ctx.block.body(h)
        params = [p for p in ctx.block.parameters()]
        grads = torch.autograd.grad(out, [h, *params], grad)
        for p, g in zip(params, grads[1:]):
            p.grad = g if p.grad is None else p.grad + g
        return grads[0], None


class HandBlock(Block):
    def forward(self, h):
        return Recompute.apply(h, self)


def build():
    return Net([HandBlock()])
"""
)
