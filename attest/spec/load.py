"""Loading ``attest.yaml`` into a :class:`~attest.spec.model.LoadedSpec`.

:func:`load_spec` validates the YAML (:func:`~attest.spec.parse.parse_spec_file`), resolves the
model factory ("module:callable", looked up next to the spec file first, then among installed
packages), loads the trained weights and the probe inputs (:mod:`attest.spec.files`) and checks
that the weights fit the model the factory builds. Every problem is a
:class:`~attest.errors.ConfigError` or :class:`~attest.errors.InputError` naming the file and
what is wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.errors import ConfigError, InputError
from attest.spec.compiled import CompileInfo, strip_compile_prefix, unwrap_compiled
from attest.spec.factory import resolve_callable
from attest.spec.files import (
    existing_file,
    first_line,
    read_probe,
    read_probe_tensors,
    read_state_dict,
)
from attest.spec.model import LoadedSpec, SpecFile, TrainingConfig, budget_seconds
from attest.spec.parse import parse_spec_file

if TYPE_CHECKING:
    import torch
    from torch import nn

    from attest.spec.model_call import ModelCall

__all__ = ["load_spec"]


def load_spec(path: str | Path) -> LoadedSpec:
    """Load ``attest.yaml``: validate it, build the model with its trained weights, read the probe.

    The factory is called once here to check that the weights fit;
    :attr:`LoadedSpec.build_model` builds a fresh copy on each call.
    """
    import torch

    from attest.spec.load_call import load_call, needs_call, plain_loss

    spec_path = Path(path).resolve()
    spec = parse_spec_file(spec_path)
    spec_dir = spec_path.parent
    weights_path = existing_file(spec_dir, spec.model.weights, what="weights", spec_path=spec_path)
    probe_path = existing_file(spec_dir, spec.inputs.probe, what="probe", spec_path=spec_path)

    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"spec {spec_path}: device {spec.device!r} but CUDA is not available on this machine",
            hint="collect on a CUDA host or set device: cpu",
        )

    factory = resolve_callable(spec.model.factory, spec_dir, what="factory", spec_path=spec_path)
    loss_fn = (
        plain_loss(resolve_callable(spec.loss, spec_dir, what="loss", spec_path=spec_path))
        if spec.loss and not _is_target_fn(spec.target)
        else None
    )
    state = read_state_dict(weights_path, spec_path)
    factory_args = dict(spec.model.factory_args)
    compiled: list[CompileInfo] = []  # what the first build found
    build_model = _model_builder(
        spec, spec_path, weights_path, factory, factory_args, state, compiled
    )
    model = build_model()  # fail now, at load, if the factory raises or the weights do not fit
    target: Any = spec.target
    call = None
    signatures, signature_labels = None, None
    if needs_call(spec):
        raw = read_probe_tensors(probe_path, spec_path)
        loaded = load_call(spec, spec_path, probe_path, raw, model, loss_fn)
        call, x, labels, target, loss_fn = (
            loaded.call,
            loaded.inputs,
            loaded.labels,
            loaded.target,
            loaded.loss_fn,
        )
        signatures, signature_labels = loaded.signatures, loaded.signature_labels

        build_model = _installed(build_model, call)
        first = build_model()
        _first_call(first, x, spec_path)
        call.fix_classes(first, x)
        if target == "label" or (labels is not None and not call.computes_f):
            _check_labels(spec, spec_path, probe_path, labels, loss_fn)
    else:
        x, labels = read_probe(probe_path, spec_path)
        _check_labels(spec, spec_path, probe_path, labels, loss_fn)
    return LoadedSpec(
        path=spec_path,
        name=spec.model.name,
        version=spec.model.version,
        factory=spec.model.factory,
        factory_args=factory_args,
        build_model=build_model,
        inputs=x,
        labels=labels,
        target=target,
        call=call,
        signatures=signatures,
        signature_labels=signature_labels or [],
        loss_fn=loss_fn,
        loss=spec.loss,
        baseline=spec.baseline,
        precision=spec.precision,
        device=spec.device,
        threads=spec.threads,
        repeats=spec.repeats,
        export=spec.export,
        artifacts={"spec": spec_path, "weights": weights_path, "probe": probe_path},
        training=_training(spec, spec_dir, spec_path),
        budget_s=budget_seconds(spec.budget) if spec.budget is not None else None,
        compiled=compiled[0] if compiled[0].compiled or compiled[0].stripped_keys else None,
    )


def _model_builder(
    spec: SpecFile,
    spec_path: Path,
    weights_path: Path,
    factory: Callable[..., Any],
    factory_args: dict[str, Any],
    state: dict[str, Any],
    compiled: list[CompileInfo],
) -> Callable[[], nn.Module]:
    """``build_model``: a fresh module from the factory with the trained weights, on the CPU
    in eval mode; a factory that raises or weights that do not fit are a ConfigError. A
    ``torch.compile``'d model is unwrapped, and weights saved from one load with their
    ``_orig_mod.`` prefix removed (:mod:`attest.spec.compiled`); the first build appends what
    it found to ``compiled``."""
    from torch import nn

    loadable: list[dict[str, Any]] = []  # the weights as they fit, decided at the first build

    def build_model() -> nn.Module:
        try:
            model = factory(**factory_args)
        except Exception as exc:
            raise ConfigError(
                f"factory {spec.model.factory!r} in {spec_path} raised {type(exc).__name__}: "
                f"{first_line(exc)}",
                hint="check factory_args and that the factory builds the model without data",
            ) from None
        if not isinstance(model, nn.Module):
            raise ConfigError(
                f"factory {spec.model.factory!r} in {spec_path} returned {type(model).__name__}, "
                "not a torch.nn.Module"
            )
        model, info = unwrap_compiled(model)
        if not loadable:
            fitted, stripped = strip_compile_prefix(state, set(model.state_dict()))
            loadable.append(fitted)
            compiled.append(dataclasses.replace(info, stripped_keys=stripped))
        try:
            model.load_state_dict(loadable[0], strict=True)
        except Exception as exc:
            hint = "the weights must be the state_dict of exactly this architecture"
            keys_mismatch = str(exc).startswith("Error(s) in loading state_dict")
            if not keys_mismatch and getattr(state, "_metadata", None) is None:
                hint += (
                    "; a module that reads its state-dict version while loading needs the "
                    "version metadata that torch.save(model.state_dict(), 'weights.pt') keeps "
                    "and safetensors does not"
                )
            raise ConfigError(
                f"weights {weights_path} do not fit the model built by {spec.model.factory!r}: "
                f"{_summarize_state_dict_error(exc)}",
                hint=hint,
            ) from None
        return model.cpu().eval()

    return build_model


def _first_call(model: nn.Module, x: torch.Tensor, spec_path: Path) -> None:
    """One forward of the first probe example through the spec's call, at load: arguments
    placed wrongly or an output path that names nothing fail here, with the reason."""
    import torch

    try:
        with torch.no_grad():
            model(x[:1])
    except Exception as exc:
        raise ConfigError(
            f"spec {spec_path}: calling the model with the named inputs raised "
            f"{type(exc).__name__}: {first_line(exc)}",
            hint="check each input's arg:/kwarg: against the model's forward, and output:/"
            "heads: against what it returns (docs/spec.md)",
        ) from None


def _is_target_fn(target: Any) -> bool:
    return isinstance(target, str) and target not in ("argmax", "label")


def _installed(build: Callable[[], nn.Module], call: ModelCall) -> Callable[[], nn.Module]:
    """``build_model`` whose models answer ``model(x)`` through ``call``."""

    def build_model() -> nn.Module:
        return call.install(build())

    return build_model


def _check_labels(
    spec: SpecFile,
    spec_path: Path,
    probe_path: Path,
    labels: torch.Tensor | None,
    loss_fn: Callable[..., Any] | None,
) -> None:
    """Float targets need a loss that reads them; ``target: label`` needs one non-negative
    class label per probe example."""
    if labels is not None and labels.is_floating_point():
        if spec.target == "label" or loss_fn is None:
            raise InputError(
                f"spec {spec_path}: probe {probe_path} 'target' has dtype "
                f"{str(labels.dtype).removeprefix('torch.')}, expected integer class labels "
                + ("for target: label" if spec.target == "label" else "without a loss"),
                hint="float targets (regression, multi-label, soft labels or masks) are read by "
                "the spec's loss: add loss: module:callable; class labels are integers",
            )
        return
    if spec.target != "label":
        return
    if labels is None:
        raise ConfigError(
            f"spec {spec_path}: target is 'label' but probe {probe_path} has no 'target' tensor",
            hint="add per-example labels as 'target' to the probe, or use target: argmax",
        )
    if labels.dim() != 1:
        raise ConfigError(
            f"spec {spec_path}: target is 'label' but probe {probe_path} 'target' has shape "
            f"{tuple(labels.shape)}, not one class per example",
            hint="use an int target (the class channel) for label maps, or store (N,) labels",
        )
    if bool((labels < 0).any()):
        raise InputError(
            f"spec {spec_path}: target is 'label' but probe {probe_path} 'target' holds "
            "negative labels, which name no class to differentiate",
            hint="negative labels (a loss's ignore_index) are fine with an int or argmax target",
        )


def _summarize_state_dict_error(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    text = text.removeprefix("Error(s) in loading state_dict for ")
    return text[:600] + (" ..." if len(text) > 600 else "")


def _training(spec: SpecFile, spec_dir: Path, spec_path: Path) -> TrainingConfig | None:
    """The ``training:`` mapping with its optimizer factory resolved (None: not declared)."""
    section = spec.training
    if section is None:
        return None
    make_optimizer = (
        resolve_callable(section.optimizer, spec_dir, what="optimizer", spec_path=spec_path)
        if section.optimizer
        else None
    )
    return TrainingConfig(
        optimizer=section.optimizer,
        make_optimizer=make_optimizer,
        autocast=section.autocast,
        grad_scaler=section.grad_scaler,
        checkpoint=list(section.checkpoint),
        batch_sizes=list(section.batch_sizes),
        steps=section.steps,
    )
