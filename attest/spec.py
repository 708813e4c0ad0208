"""The model spec (``attest.yaml``): what to certify, and loading it into a :class:`LoadedSpec`.

:func:`load_spec` validates the YAML against :class:`SpecFile` (unknown keys are an error
naming the key and the file), resolves the model factory ("module:callable", looked up next
to the spec file first, then among installed packages), loads the trained weights
(safetensors, or a ``.pt`` state_dict read with ``torch.load(weights_only=True)``; never a
pickled module) and the probe inputs (safetensors / npz / pt with ``"x"`` and an optional
``"target"``). Every problem is a :class:`~attest.errors.ConfigError` or
:class:`~attest.errors.InputError` naming the file and what is wrong.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from attest.errors import ConfigError, InputError

__all__ = ["InputsSection", "ModelSection", "SpecFile", "load_spec", "parse_spec_file"]

_DEVICE_RE = re.compile(r"^(cpu|cuda|cuda:\d+)$")
_FACTORY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
MAX_SPEC_BYTES = 1 << 20


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    """``model:`` -- identity of the model line and how to build it with its trained weights."""

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    factory: str
    factory_args: dict[str, Any] = Field(default_factory=dict)
    weights: str = Field(min_length=1)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a version string such as '1.2.0'")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            # YAML reads 1.10 as the float 1.1: refuse rather than silently change the version.
            raise ValueError(f"{value!r} was read as a number; quote it, e.g. version: '{value}'")
        return value

    @field_validator("factory")
    @classmethod
    def _factory_shape(cls, value: str) -> str:
        if not _FACTORY_RE.match(value):
            raise ValueError(f"{value!r} is not 'module:callable' (e.g. 'model:build')")
        return value


class InputsSection(_Strict):
    """``inputs:`` -- the probe inputs every check runs on."""

    probe: str = Field(min_length=1)


class SpecFile(_Strict):
    """The ``attest.yaml`` file, as written by a user (every field in docs/spec.md)."""

    model: ModelSection
    inputs: InputsSection
    target: int | Literal["argmax", "label"] = "argmax"
    loss: str | None = None
    baseline: Literal["zero", "mean", "blur", "uniform"] = "zero"
    precision: Literal["float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    threads: int = Field(default=2, ge=1, le=1024)
    repeats: int = Field(default=20, ge=1, le=100000)
    export: Literal["onnx"] | None = None

    @field_validator("target", mode="before")
    @classmethod
    def _target_not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a class index, 'argmax' or 'label'")
        if isinstance(value, int) and value < 0:
            raise ValueError("a class index must be >= 0")
        return value

    @field_validator("loss")
    @classmethod
    def _loss_shape(cls, value: str | None) -> str | None:
        if value is not None and not _FACTORY_RE.match(value):
            raise ValueError(f"{value!r} is not 'module:callable' (e.g. 'model:loss')")
        return value

    @field_validator("device")
    @classmethod
    def _device_shape(cls, value: str) -> str:
        if not _DEVICE_RE.match(value):
            raise ValueError(f"{value!r} is not one of cpu, cuda, cuda:N")
        return value


# --- YAML ------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML silently keeps the last one)."""


def _construct_unique_mapping(
    loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False
) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_unique_mapping,
)


def _format_validation_error(exc: ValidationError, path: Path) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            where = ".".join(str(p) for p in err["loc"][:-1]) or "the top level"
            lines.append(f"unknown key {err['loc'][-1]!r} in {where}")
        elif err["type"] == "missing":
            lines.append(f"missing required key {loc!r}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}")
    return f"invalid spec {path}: " + "; ".join(lines)


def parse_spec_file(path: str | Path) -> SpecFile:
    """Read and validate an ``attest.yaml`` without loading the model (no torch needed)."""
    p = Path(path)
    try:
        if p.is_dir():
            raise ConfigError(f"spec {p} is a directory; give the attest.yaml file")
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise ConfigError(f"spec {p} is {size} bytes, over the {MAX_SPEC_BYTES}-byte limit")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"spec {p} does not exist", hint="check the path to attest.yaml"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"spec {p} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read spec {p}: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"spec {p} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"spec {p} must be a YAML mapping with 'model' and 'inputs' sections")
    try:
        return SpecFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            _format_validation_error(exc, p), hint="see docs/spec.md for the spec format"
        ) from None


# --- factories -------------------------------------------------------------------------------


@contextlib.contextmanager
def _local_import_path(folder: Path, top_name: str) -> Iterator[None]:
    """Import ``top_name`` from ``folder`` without leaving it in the module cache.

    The folder goes first on ``sys.path`` only while importing; any module loaded from the
    folder is then dropped from ``sys.modules`` (the loaded objects stay alive through their
    references) and shadowed entries are restored, so two specs that both ship a ``model.py``
    never see each other's module.
    """
    folder_str = str(folder)
    shadowed = {
        name: mod
        for name, mod in sys.modules.items()
        if name == top_name or name.startswith(top_name + ".")
    }
    for name in shadowed:
        del sys.modules[name]
    sys.path.insert(0, folder_str)
    before = set(sys.modules)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder_str)
        for name in set(sys.modules) - before:
            mod_file = getattr(sys.modules[name], "__file__", None)
            if mod_file and _is_under(Path(mod_file), folder):
                del sys.modules[name]
        sys.modules.update(shadowed)


def _is_under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        return False
    return True


def resolve_callable(
    target: str, spec_dir: Path, *, what: str, spec_path: Path
) -> Callable[..., Any]:
    """``"module:callable"``: the module next to the spec file first, then an installed package."""
    module_name, _, attr_path = target.partition(":")
    top = module_name.split(".")[0]
    local = (spec_dir / f"{top}.py").is_file() or (spec_dir / top / "__init__.py").is_file()
    try:
        if local:
            with _local_import_path(spec_dir, top):
                module = importlib.import_module(module_name)
        else:
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise ConfigError(
                f"{what} {target!r} in {spec_path}: module {module_name!r} is neither next to the "
                f"spec ({spec_dir}) nor an installed package",
                hint=f"put {top}.py beside the spec or install the package",
            ) from None
        raise ConfigError(f"{what} {target!r} in {spec_path}: importing it failed: {exc}") from None
    except Exception as exc:
        raise ConfigError(
            f"{what} {target!r} in {spec_path}: importing module {module_name!r} raised "
            f"{type(exc).__name__}: {exc}",
            hint=f"run python -c 'import {module_name}' for the full error (a package built "
            "for another torch version fails this way)",
        ) from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"{what} {target!r} in {spec_path}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if not callable(obj):
        raise ConfigError(f"{what} {target!r} in {spec_path}: {attr_path!r} is not callable")
    return obj  # type: ignore[no-any-return]


# --- loading ---------------------------------------------------------------------------------


def _existing_file(spec_dir: Path, rel: str, *, what: str, spec_path: Path) -> Path:
    path = Path(rel)
    if not path.is_absolute():
        path = spec_dir / path
    if not path.exists():
        raise InputError(
            f"{what} file {path} (named in {spec_path}) does not exist",
            hint="check the path; paths are relative to the spec file",
        )
    if not path.is_file():
        raise InputError(f"{what} {path} (named in {spec_path}) is not a file")
    return path


def _read_state_dict(path: Path, spec_path: Path) -> dict[str, Any]:
    import torch

    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            state: Any = load_file(str(path), device="cpu")
        elif suffix in (".pt", ".pth", ".bin", ".ckpt"):
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        else:
            raise InputError(
                f"weights {path} (named in {spec_path}): unsupported file type {suffix or '(none)'!r}",
                hint="use .safetensors or a .pt state_dict saved with torch.save(model.state_dict(), ...)",
            )
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"weights {path} (named in {spec_path}) cannot be read: {type(exc).__name__}: {_first_line(exc)}",
            hint="save plain tensors: torch.save(model.state_dict(), path) or safetensors; "
            "a pickled module is never loaded",
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise InputError(
            f"weights {path} (named in {spec_path}) is not a state_dict (a mapping of names to tensors)",
            hint="save model.state_dict(), not the module or a training checkpoint object",
        )
    if not state:
        raise InputError(f"weights {path} (named in {spec_path}) holds no tensors")
    for key, tensor in state.items():
        if tensor.is_floating_point() or tensor.is_complex():
            bad = ~torch.isfinite(tensor)
            if bool(bad.any()):
                first = [int(i) for i in bad.nonzero()[0].tolist()]
                kind = "NaN" if bool(torch.isnan(tensor).any()) else "Inf"
                raise InputError(
                    f"weights {path}: tensor {key!r} holds {int(bad.sum())} non-finite value(s) "
                    f"({kind}), first at index {tuple(first)}",
                    hint="a certificate is about trained, finite weights; fix the training run",
                )
    # The mapping itself, not a dict() copy: torch.save keeps the state_dict's ``_metadata``
    # (each module's state-dict version), which load_state_dict hands to modules that convert
    # older layouts (torchvision's MNASNet refuses to load without it).
    return state


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def _read_probe(path: Path, spec_path: Path) -> tuple[Any, Any]:
    import numpy as np
    import torch

    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            raw: Any = load_file(str(path), device="cpu")
        elif suffix == ".npz":
            with np.load(str(path), allow_pickle=False) as npz:
                raw = {}
                for key in npz.files:
                    arr = npz[key]
                    if arr.dtype.kind not in "fiub":
                        raise InputError(
                            f"probe {path}: array {key!r} has unsupported dtype {arr.dtype}"
                        )
                    raw[key] = torch.from_numpy(np.ascontiguousarray(arr))
        elif suffix in (".pt", ".pth"):
            raw = torch.load(str(path), map_location="cpu", weights_only=True)
        else:
            raise InputError(
                f"probe {path} (named in {spec_path}): unsupported file type {suffix or '(none)'!r}",
                hint="use .safetensors, .npz or .pt holding tensors 'x' and optionally 'target'",
            )
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"probe {path} (named in {spec_path}) cannot be read: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    if isinstance(raw, torch.Tensor):
        raw = {"x": raw}
    if not isinstance(raw, dict) or "x" not in raw or not isinstance(raw["x"], torch.Tensor):
        raise InputError(
            f"probe {path} (named in {spec_path}) has no tensor 'x'",
            hint="store the probe batch as 'x' with shape (N, ...) and labels as 'target' (N,)",
        )
    x = raw["x"]
    if not x.is_floating_point():
        raise InputError(
            f"probe {path}: 'x' has dtype {str(x.dtype).removeprefix('torch.')}, expected floating point",
            hint="store the inputs as float32 (or float64/float16/bfloat16)",
        )
    if x.dim() < 1 or x.shape[0] < 1:
        raise InputError(
            f"probe {path}: 'x' has shape {tuple(x.shape)}; expected (N, ...) with N >= 1"
        )
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        first = [int(i) for i in bad.nonzero()[0].tolist()]
        raise InputError(
            f"probe {path}: 'x' holds non-finite values, first at index {tuple(first)}"
        )
    target = raw.get("target")
    if target is not None:
        if not isinstance(target, torch.Tensor):
            raise InputError(f"probe {path}: 'target' is not a tensor")
        if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
            raise InputError(
                f"probe {path}: 'target' has dtype {str(target.dtype).removeprefix('torch.')}, "
                "expected integer class labels"
            )
        # (N,) class labels, or (N, *spatial) label maps for a segmentation loss
        if target.dim() < 1 or target.shape[0] != x.shape[0]:
            raise InputError(
                f"probe {path}: 'target' has shape {tuple(target.shape)}, expected ({x.shape[0]},) "
                f"or ({x.shape[0]}, ...) to match 'x'"
            )
        # Negative labels are a loss's "ignore" marker (cross_entropy's ignore_index, -100 by
        # default): kept for the loss; load_spec refuses them as classes for target: label.
        target = target.to(torch.long).contiguous()
    return x.contiguous(), target


def load_spec(path: str | Path) -> Any:
    """Load ``attest.yaml``: validate it, build the model with its trained weights, read the probe.

    Returns an :class:`attest.collection.context.LoadedSpec`. The factory is called once here to
    check that the weights fit; :attr:`LoadedSpec.build_model` builds a fresh copy on each call.
    """
    import torch
    from torch import nn

    from attest.collection.context import LoadedSpec

    spec_path = Path(path).resolve()
    spec = parse_spec_file(spec_path)
    spec_dir = spec_path.parent
    weights_path = _existing_file(spec_dir, spec.model.weights, what="weights", spec_path=spec_path)
    probe_path = _existing_file(spec_dir, spec.inputs.probe, what="probe", spec_path=spec_path)

    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"spec {spec_path}: device {spec.device!r} but CUDA is not available on this machine",
            hint="collect on a CUDA host or set device: cpu",
        )

    factory = resolve_callable(spec.model.factory, spec_dir, what="factory", spec_path=spec_path)
    loss_fn = (
        resolve_callable(spec.loss, spec_dir, what="loss", spec_path=spec_path)
        if spec.loss
        else None
    )
    state = _read_state_dict(weights_path, spec_path)
    factory_args = dict(spec.model.factory_args)

    def build_model() -> nn.Module:
        try:
            model = factory(**factory_args)
        except Exception as exc:
            raise ConfigError(
                f"factory {spec.model.factory!r} in {spec_path} raised {type(exc).__name__}: "
                f"{_first_line(exc)}",
                hint="check factory_args and that the factory builds the model without data",
            ) from None
        if not isinstance(model, nn.Module):
            raise ConfigError(
                f"factory {spec.model.factory!r} in {spec_path} returned {type(model).__name__}, "
                "not a torch.nn.Module"
            )
        try:
            model.load_state_dict(state, strict=True)
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

    build_model()  # fail now, at load, if the factory raises or the weights do not fit
    x, labels = _read_probe(probe_path, spec_path)
    if spec.target == "label" and labels is None:
        raise ConfigError(
            f"spec {spec_path}: target is 'label' but probe {probe_path} has no 'target' tensor",
            hint="add per-example labels as 'target' to the probe, or use target: argmax",
        )
    if spec.target == "label" and labels is not None and labels.dim() != 1:
        raise ConfigError(
            f"spec {spec_path}: target is 'label' but probe {probe_path} 'target' has shape "
            f"{tuple(labels.shape)}, not one class per example",
            hint="use an int target (the class channel) for label maps, or store (N,) labels",
        )
    if spec.target == "label" and labels is not None and bool((labels < 0).any()):
        raise InputError(
            f"spec {spec_path}: target is 'label' but probe {probe_path} 'target' holds "
            "negative labels, which name no class to differentiate",
            hint="negative labels (a loss's ignore_index) are fine with an int or argmax target",
        )
    return LoadedSpec(
        path=spec_path,
        name=spec.model.name,
        version=spec.model.version,
        factory=spec.model.factory,
        factory_args=factory_args,
        build_model=build_model,
        inputs=x,
        labels=labels,
        target=spec.target,
        loss_fn=loss_fn,
        loss=spec.loss,
        baseline=spec.baseline,
        precision=spec.precision,
        device=spec.device,
        threads=spec.threads,
        repeats=spec.repeats,
        export=spec.export,
        artifacts={"spec": spec_path, "weights": weights_path, "probe": probe_path},
    )


def _summarize_state_dict_error(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    text = text.removeprefix("Error(s) in loading state_dict for ")
    return text[:600] + (" ..." if len(text) > 600 else "")
