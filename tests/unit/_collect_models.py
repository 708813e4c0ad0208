"""Tiny models written as spec folders (attest.yaml + model.py + weights + probe) in tmp_path."""

from __future__ import annotations

import importlib.util
import itertools
import textwrap
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

_COUNTER = itertools.count()

MLP = """
import torch
from torch import nn

def build(width=16):
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 3))
"""

LINEAR_RELU = """
from torch import nn

def build():
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU())
"""


def make_spec(
    folder: Path,
    source: str = MLP,
    *,
    x: torch.Tensor | None = None,
    target: torch.Tensor | None = None,
    spec_extra: str = "repeats: 3\nthreads: 2\n",
    seed: int = 0,
    factory_args: dict[str, Any] | None = None,
) -> Path:
    """Write a spec folder and return the path of its attest.yaml."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(textwrap.dedent(source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(
        f"_collect_model_{next(_COUNTER)}", folder / "model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    model = module.build(**(factory_args or {}))
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        str(folder / "weights.safetensors"),
    )
    if x is None:
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed + 1))
    probe = {"x": x}
    if target is not None:
        probe["target"] = target
    save_file(probe, str(folder / "probe.safetensors"))
    args = f"  factory_args: {factory_args!r}\n".replace("'", '"') if factory_args else ""
    text = (
        "model:\n  name: tiny\n  version: 1.0.0\n  factory: model:build\n"
        f"{args}  weights: weights.safetensors\ninputs:\n  probe: probe.safetensors\n{spec_extra}"
    )
    path = folder / "attest.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# What differs between two runs of the same work: wall-clock figures, where files were put.
VOLATILE = ("_ns", "duration_s", "peak_rss_bytes", "created_at", "path", "cpu_s")


def stable(value: Any) -> Any:
    """``value`` (evidence as JSON) without the fields :data:`VOLATILE` names."""
    if isinstance(value, dict):
        return {
            k: stable(v)
            for k, v in value.items()
            if not any(k.endswith(s) or k == s for s in VOLATILE) and "_ns_" not in k
        }
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value
