"""The environment the Makefile builds (requirements-dev.txt) imports every package it installs.

A wheel built for another torch (torchvision's CUDA build beside the CPU torch: "operator
torchvision::nms does not exist") installs cleanly and only fails at import, and then takes
down what imports it in turn (transformers' models). Each requirement's import names come from
its installed files (``importlib.metadata.packages_distributions``); all are imported in one
fresh interpreter, so that an import's side effects (warnings, registrations) stay out of
this test process.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> list[str]:
    """The distribution names requirements-dev.txt installs on this platform."""
    names = []
    for line in (REPO / "requirements-dev.txt").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate():
            names.append(_normalized(requirement.name))
    return names


def import_names() -> dict[str, list[str]]:
    """Each requirement's top-level import names (stub-only and private modules left out)."""
    found: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        if not module.isidentifier() or module.startswith("_"):
            continue  # yaml-stubs, mypyc's hashed runtime module, pytest's _pytest
        for dist in dists:
            found.setdefault(_normalized(dist), set()).add(module)
    return {name: sorted(found.get(name, ())) for name in requirements()}


def test_requirements_are_read() -> None:
    names = requirements()
    assert {"torch", "monai", "transformers", "einops"} <= set(names)
    assert "torchvision" not in names  # no build in the indexes imports beside the CPU torch


def test_every_package_requirements_dev_installs_imports() -> None:
    modules = import_names()
    typing_only = {"types-pyyaml", "types-jsonschema"}  # stubs for mypy: nothing to import
    commands = {"py-spy": "py-spy"}  # a command-line tool only (bench_ledger_service --profile)
    for name, command in commands.items():
        assert (Path(sys.executable).parent / command).exists(), f"{name}: no {command} command"
    missing = [n for n, m in modules.items() if not m and n not in typing_only | set(commands)]
    assert not missing, f"requirements-dev.txt names packages not installed here: {missing}"
    script = (
        "import importlib, json, sys\n"
        "failed = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException as exc:\n"
        "        failed[name] = f'{type(exc).__name__}: {exc}'[:300]\n"
        "print(json.dumps(failed))\n"
    )
    wanted = sorted({m for names in modules.values() for m in names})
    done = subprocess.run(
        [sys.executable, "-c", script, *wanted],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, f"installed but not importable: {failed}"


def test_transformers_builds_a_bert_classifier() -> None:
    """What the broken torchvision stopped: transformers' lazy import of a model class."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from transformers import BertConfig, BertForSequenceClassification\n"
            "c = BertConfig(num_hidden_layers=1, hidden_size=8, num_attention_heads=2,"
            " intermediate_size=16, vocab_size=32)\n"
            "print(type(BertForSequenceClassification(c)).__name__)\n",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("BertForSequenceClassification")
