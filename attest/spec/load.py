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
from attest.spec.monai_bundle import METADATA, bundle_source, is_monai_bundle, read_metadata
from attest.spec.parse import parse_spec_file
from attest.spec.pretrained import pretrained_source
from attest.spec.source import ModelSource

if TYPE_CHECKING:
    import torch
    from torch import nn

    from attest.spec.model_call import ModelCall

__all__ = ["load_spec"]


def load_spec(path: str | Path, *, spec: str | Path | None = None) -> LoadedSpec:
    """Load ``attest.yaml``: validate it, build the model with its trained weights, read the probe.

    ``path`` is ``attest.yaml``, or a MONAI bundle folder (:mod:`attest.spec.monai_bundle`)
    whose probe and target come from ``spec`` (default: ``attest.yaml`` beside the bundle).
    The model is built once here to check that the weights fit;
    :attr:`LoadedSpec.build_model` builds a fresh copy on each call.
    """
    import torch

    from attest.spec.load_call import load_call, needs_call, plain_loss

    given = Path(path).resolve()
    bundle = given if given.is_dir() else None
    spec_path = _bundle_spec(given, spec) if bundle is not None else given
    if bundle is None and spec is not None:
        raise InputError(
            f"a spec ({spec}) was given for {path}, which is already a spec file",
            hint="--spec goes with a MONAI bundle folder: attest certify path/to/bundle/ "
            "--spec attest.yaml",
        )
    parsed = parse_spec_file(spec_path)
    spec_dir = spec_path.parent
    probe_path = existing_file(spec_dir, parsed.inputs.probe, what="probe", spec_path=spec_path)

    if parsed.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"spec {spec_path}: device {parsed.device!r} but CUDA is not available on this machine",
            hint="collect on a CUDA host or set device: cpu",
        )

    source = _source(parsed, spec_path, bundle)
    loss_fn = (
        plain_loss(resolve_callable(parsed.loss, spec_dir, what="loss", spec_path=spec_path))
        if parsed.loss and not _is_target_fn(parsed.target)
        else None
    )
    compiled: list[CompileInfo] = []  # what the first build found
    build_model = _model_builder(source, compiled)
    model = build_model()  # fail now, at load, if the factory raises or the weights do not fit
    target: Any = parsed.target
    call = None
    signatures, signature_labels = None, None
    if needs_call(parsed):
        raw = read_probe_tensors(probe_path, spec_path)
        loaded = load_call(parsed, spec_path, probe_path, raw, model, loss_fn)
        call, x, labels, target, loss_fn = (
            loaded.call,
            loaded.inputs,
            loaded.labels,
            loaded.target,
            loaded.loss_fn,
        )
        signatures, signature_labels = loaded.signatures, loaded.signature_labels
        _check_bundle_format(source, parsed, raw, model, None)

        build_model = _installed(build_model, call)
        first = build_model()
        _first_call(first, x, spec_path)
        call.fix_classes(first, x)
        if target == "label" or (labels is not None and not call.computes_f):
            _check_labels(parsed, spec_path, probe_path, labels, loss_fn)
    else:
        x, labels = read_probe(probe_path, spec_path)
        _check_bundle_format(source, parsed, {"x": x}, model, x)
        _check_labels(parsed, spec_path, probe_path, labels, loss_fn)
    artifacts = {"spec": spec_path, "probe": probe_path}
    if source.weights is not None:
        artifacts["weights"] = source.weights
    return LoadedSpec(
        path=bundle if bundle is not None else spec_path,
        name=source.name,
        version=source.version,
        factory=source.factory,
        factory_args=source.factory_args,
        build_model=build_model,
        inputs=x,
        labels=labels,
        target=target,
        call=call,
        signatures=signatures,
        signature_labels=signature_labels or [],
        loss_fn=loss_fn,
        loss=parsed.loss,
        baseline=parsed.baseline,
        precision=parsed.precision,
        device=parsed.device,
        threads=parsed.threads,
        repeats=parsed.repeats,
        export=parsed.export,
        artifacts=artifacts,
        training=_training(parsed, spec_dir, spec_path),
        budget_s=budget_seconds(parsed.budget) if parsed.budget is not None else None,
        compiled=compiled[0] if compiled[0].compiled or compiled[0].stripped_keys else None,
        folder=source.folder,
        spec_override=Path(spec).resolve() if spec is not None else None,
    )


def _bundle_spec(bundle: Path, spec: str | Path | None) -> Path:
    """The attest.yaml of a bundle: ``spec`` when given, else ``attest.yaml`` beside it."""
    if not is_monai_bundle(bundle):
        raise InputError(
            f"{bundle} is a folder, but not a MONAI bundle (no {METADATA.as_posix()})",
            hint="give attest.yaml, or a MONAI bundle folder; a Hugging Face folder is named "
            "in attest.yaml by model: {pretrained: FOLDER}",
        )
    found = Path(spec).resolve() if spec is not None else bundle.parent / "attest.yaml"
    if spec is None and not found.is_file():
        raise ConfigError(
            f"MONAI bundle {bundle}: no attest.yaml beside it ({found}) and no --spec; a bundle "
            "holds no probe to check its gradients on",
            hint="write attest.yaml beside the bundle with inputs: {probe: probe.safetensors} "
            "and target: (docs/spec.md, 'MONAI bundles'), or give --spec FILE",
        )
    return found


def _source(parsed: SpecFile, spec_path: Path, bundle: Path | None) -> ModelSource:
    """Where the model comes from: the bundle, a Hugging Face folder, or factory + weights."""
    spec_dir = spec_path.parent
    section = parsed.model
    if bundle is not None:
        if section is not None:
            raise ConfigError(
                f"spec {spec_path}: model: is given, but the MONAI bundle {bundle} defines the "
                "model (network_def, models/model.pt, metadata.json)",
                hint="remove model: from the spec used with a bundle; it gives the probe, "
                "target, loss, training and export",
            )
        return bundle_source(bundle)
    if section is None:
        raise ConfigError(
            f"spec {spec_path}: model: is missing",
            hint="give model: {name, version, factory, weights} (or pretrained:), or certify "
            "a MONAI bundle folder with this spec beside it",
        )
    if section.pretrained is not None:
        return pretrained_source(section, spec_dir, spec_path)
    assert section.factory is not None and section.weights is not None  # ModelSection's rule
    weights_path = existing_file(spec_dir, section.weights, what="weights", spec_path=spec_path)
    factory = resolve_callable(section.factory, spec_dir, what="factory", spec_path=spec_path)
    factory_args = dict(section.factory_args)
    label = section.factory

    def make() -> nn.Module:
        try:
            return factory(**factory_args)  # type: ignore[no-any-return]
        except Exception as exc:
            raise ConfigError(
                f"factory {label!r} in {spec_path} raised {type(exc).__name__}: {first_line(exc)}",
                hint="check factory_args and that the factory builds the model without data",
            ) from None

    state = read_state_dict(weights_path, spec_path)
    return ModelSource(
        section.name, section.version, label, factory_args, make, state, weights_path
    )


def _check_bundle_format(
    source: ModelSource,
    parsed: SpecFile,
    probe: dict[str, Any],
    model: nn.Module,
    x: torch.Tensor | None,
) -> None:
    """A bundle's probe and network output against its metadata's network_data_format."""
    import torch

    from attest.spec.bundle_format import check_inputs, check_outputs

    folder = source.folder
    if folder is None or folder.kind != "monai_bundle":
        return
    meta = folder.root / METADATA
    fmt = read_metadata(folder.root)["network_data_format"]
    named = list(parsed.inputs.named)
    tensors = {
        n: probe[i.key or n] for n, i in parsed.inputs.named.items() if (i.key or n) in probe
    }
    check_inputs(fmt, tensors if named else probe, named, meta)
    if x is not None and parsed.output is None:
        with torch.no_grad():
            check_outputs(fmt, model(x[:1]), meta)


def _model_builder(source: ModelSource, compiled: list[CompileInfo]) -> Callable[[], nn.Module]:
    """``build_model``: a fresh module from the source with its trained weights, on the CPU
    in eval mode; a build that raises or weights that do not fit are a ConfigError. A
    ``torch.compile``'d model is unwrapped, and weights saved from one load with their
    ``_orig_mod.`` prefix removed (:mod:`attest.spec.compiled`); the first build appends what
    it found to ``compiled``."""
    from torch import nn

    loadable: list[dict[str, Any]] = []  # the weights as they fit, decided at the first build
    state = source.state

    def build_model() -> nn.Module:
        model = source.make()
        if not isinstance(model, nn.Module):
            raise ConfigError(
                f"{source.factory!r} returned {type(model).__name__}, not a torch.nn.Module"
            )
        model, info = unwrap_compiled(model)
        if state is None:  # the source loaded the weights itself
            if not compiled:
                compiled.append(info)
            return model.cpu().eval()
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
                f"weights {source.weights} do not fit the model built by {source.factory!r}: "
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
