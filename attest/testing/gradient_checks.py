"""``check_gradients``: the checks of ``attest collect`` on an in-memory model and a small
input, restricted to the checks asked for, with a readable list of what failed.

Used by the pytest plugin (:mod:`attest.testing.pytest_plugin`); callable on its own::

    result = check_gradients(model, x, target=y, loss=F.cross_entropy,
                             checks=("gradcheck", "numerics"))
    assert result.passed, result.summary()

The model is built afresh for each run by ``copy.deepcopy`` of the one given (the caller's
module is not changed). Each check's own reading of its items decides (``fail`` and ``error``
items fail; ``warn`` is listed, never a failure); with ``policy=`` the policy's rules on the
asked checks decide instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attest.collection import CHECK_RUNNERS, RUNNER_CHECKS, collect
from attest.collection.context import CheckSettings
from attest.errors import InputError
from attest.evidence.model import CHECK_IDS, TOPOLOGY_CHECKS, Evidence
from attest.policy.engine import evaluate
from attest.policy.model import Policy, load_policy
from attest.spec.compiled import unwrap_compiled
from attest.spec.model import LoadedSpec
from attest.testing.named_inputs import named_call

__all__ = ["DEFAULT_CHECKS", "GradientCheckResult", "check_gradients"]

DEFAULT_CHECKS: tuple[str, ...] = (
    "topology",
    "numerics",
    "gradcheck",
    "custom_ops",
    "gradient_flow",
)


@dataclass
class GradientCheckResult:
    """What ran, and one line per failure: ``check: subject (operator @ module): message``."""

    checks: tuple[str, ...]
    evidence: Evidence
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        head = f"gradient checks {', '.join(self.checks)}: "
        if self.passed:
            return head + f"passed ({len(self.warnings)} warning(s))"
        lines = [head + f"{len(self.failures)} failure(s)", *(f"  {f}" for f in self.failures)]
        return "\n".join(lines)


def _runners(checks: Sequence[str]) -> list[Any]:
    wanted = set(checks) | set(TOPOLOGY_CHECKS)  # the other checks read the topology's verdict
    return [r for r in CHECK_RUNNERS if isinstance(r, str) and wanted & set(RUNNER_CHECKS[r])]


def _item_lines(evidence: Evidence, checks: Sequence[str]) -> tuple[list[str], list[str]]:
    failures: list[str] = []
    warnings: list[str] = []
    for cid in checks:
        res = evidence.checks.get(cid)
        if res is None or res.status in ("error", "not_computed", "not_implemented"):
            why = res.reason if res is not None and res.reason else "not run"
            failures.append(f"{cid}: {res.status if res else 'missing'}: {why}")
            continue
        for item in res.items:
            line = f"{cid}: {item.subject.label()}: {item.message or item.status}"
            if item.status in ("fail", "error"):
                failures.append(line)
            elif item.status == "warn":
                warnings.append(line)
    return failures, warnings


def _policy_lines(evidence: Evidence, policy: Policy, checks: Sequence[str]) -> list[str]:
    asked = policy.model_copy(update={"rules": [r for r in policy.rules if r.check in checks]})
    if not asked.rules:
        raise InputError(
            f"policy {policy.id} has no rule on the checks asked for ({', '.join(checks)})"
        )
    findings = evaluate(evidence, asked)
    return [f"{f.check}: {f.rule}: {f.message}" for f in findings.failed]


def check_gradients(
    model: nn.Module,
    inputs: torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
    *,
    target: torch.Tensor | None = None,
    roles: Mapping[str, Mapping[str, Any]] | None = None,
    output: str | int | None = None,
    loss: Callable[[Any, Any], torch.Tensor] | None = None,
    checks: Sequence[str] = DEFAULT_CHECKS,
    policy: str | Path | Policy | None = None,
    repeats: int = 3,
    threads: int = 1,
    name: str = "model-under-test",
) -> GradientCheckResult:
    """Run ``checks`` of ``attest collect`` on ``model`` at ``inputs`` (see the module doc).

    ``target`` and ``loss``: the gradients of ``loss(model(inputs), target)``; without them,
    of the predicted class's score (the spec's ``target: argmax``). ``inputs`` is a tensor, or
    a tuple (positional) or mapping (keyword arguments) of tensors: floating-point ones are
    attributed (differentiated), the others (token ids, masks) fixed, passed unchanged and
    never cast; ``roles`` sets any input's role and place as ``attest.yaml`` does (e.g.
    ``{"input_ids": {"role": "embedded", "kwarg": "input_ids", "embedding":
    "embeddings.word"}}``) and ``output`` selects the output (docs/spec.md). The checks call
    the model through the spec's :class:`~attest.spec.model_call.ModelCall`
    (:mod:`attest.testing.named_inputs`), so every check runs with fixed inputs too. A
    ``torch.compile``'d model is checked as its eager original (:mod:`attest.spec.compiled`).
    """
    unknown = [c for c in checks if c not in CHECK_IDS]
    if unknown or not checks:
        raise InputError(
            f"unknown gradient check {unknown[0]!r}" if unknown else "no gradient check asked for",
            hint="check ids: " + ", ".join(CHECK_IDS),
        )
    if (target is None) != (loss is None):
        raise InputError("give target and loss together (or neither, for the argmax target)")
    frozen, compiled = unwrap_compiled(copy.deepcopy(model).eval())  # never the caller's module
    settings = CheckSettings()
    if isinstance(inputs, (tuple, list)) and len(inputs) == 1:
        inputs = inputs[0]
    if isinstance(inputs, torch.Tensor) and not inputs.is_floating_point() and not roles:
        raise InputError(
            f"gradient_check got {inputs.dtype} inputs: integer inputs such as token ids "
            "have no gradient, and casting them to float would change what the model reads",
            hint="pass the float input the gradients are taken with respect to (ids and masks "
            "beside it, as a tuple or dict of inputs), or differentiate the ids at their "
            "embedding: roles={'arg0': {'role': 'embedded', 'embedding': MODULE}}",
        )
    build: Callable[[], nn.Module] = lambda: copy.deepcopy(frozen)  # noqa: E731
    labels = target.detach() if target is not None else None
    call = None
    if not isinstance(inputs, torch.Tensor) or roles or output is not None:
        plain = inputs if not isinstance(inputs, torch.Tensor) else (inputs,)
        loaded = named_call(
            frozen, plain, roles=roles, output=output, target=target, loss=loss, name=name
        )
        call, x, labels = loaded.call, loaded.inputs, loaded.labels
        loss = loaded.loss_fn
        build = lambda: loaded.call.install(copy.deepcopy(frozen))  # noqa: E731
    else:
        x = inputs
    spec = LoadedSpec(
        path=Path(name),
        name=name,
        version="test",
        factory=f"{type(model).__module__}:{type(model).__qualname__}",
        factory_args={},
        build_model=build,
        inputs=x.detach(),
        labels=labels,
        call=call,
        target="label" if target is not None else "argmax",
        loss_fn=loss,
        loss=getattr(loss, "__name__", None) if loss is not None else None,
        threads=threads,
        repeats=repeats,
        compiled=compiled if compiled.compiled else None,
    )
    evidence = collect(spec, runners=_runners(checks), settings=settings)
    asked = tuple(checks)
    failures, warnings = _item_lines(evidence, asked)
    if policy is not None:
        rules = policy if isinstance(policy, Policy) else load_policy(policy)
        failures = _policy_lines(evidence, rules, asked)
    return GradientCheckResult(
        checks=asked, evidence=evidence, failures=failures, warnings=warnings
    )
