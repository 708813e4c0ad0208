"""What a finished phase of a collect hands on to the later phases and to the evidence, as
plain JSON: saved in the work folder with the phase's results (:mod:`attest.collection.workdir`)
and put back when ``attest collect --resume`` reuses the phase instead of running it again.

A phase's check results are in the work folder as the evidence writes them; what else it
leaves in the :class:`~attest.collection.context.CollectContext` is here, per phase:

- ``topology``: whether the operators aligned (``ctx.topology_ok``, ``ctx.topology_reason``,
  which every later per-operator check and the evidence's rows read);
- ``profile``: every figure the float64 pass, the repeats and the thread-count run wrote into
  the reference run's :class:`~attest.collection.profile.measures.Profile` (per operator and
  for the model), from which the evidence's operator rows and model metrics are assembled.
  The tensors of run 0 (its outputs, gradients and captured arguments) are not saved: the
  resumed collect makes them again in its own reference capture, and refuses to reuse
  anything when that capture recorded other operators (:mod:`attest.collection.workdir`);
- ``ig``: the stored attributions (``ctx.ig.attributions``);
- ``export``: the export record (``ctx.export``), reused only while the files it names are
  still there with the sha256 it recorded;
- the others (``gradients``, ``training``) hand on nothing but their results.

Why a hand-written codec: the figures hold what JSON has no literal for (infinite deviations,
NaN errors, sets of operator ids, tuples, the dataclass of a model failure), and the work
folder stays JSON (readable, and never unpickled) like the evidence it becomes. Only those
types are encoded; anything else raises ``TypeError`` and the phase is then not saved.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from attest.collection.capture.run import ModelFailure
from attest.collection.context import CollectContext
from attest.collection.profile.measures import OpMeasure, Profile
from attest.core.io import sha256_file
from attest.errors import CollectError
from attest.evidence.model import ExportRecord

__all__ = ["decode", "encode", "phase_state", "restore_state", "reusable"]

# OpMeasure fields that hold run 0's tensors (or the operator overload): the resumed collect's
# own capture makes them again
_CAPTURED = frozenset({"func", "outputs", "grad_outputs", "grad_inputs"})
# Profile fields that are the capture itself, not figures measured by the profile phase
_PROFILE_OWN = frozenset({"ops", "reference", "spills", "failure", "precision", "device"})


def encode(value: Any) -> Any:
    """``value`` as JSON data; the types JSON lacks are tagged objects (module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        items = sorted(value, key=lambda v: (type(v).__name__, repr(v)))
        return {"$set": [encode(v) for v in items]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a dict with keys that are not strings")
        return {"$dict": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, ModelFailure):
        return {"$failure": {f.name: encode(getattr(value, f.name)) for f in _fields(value)}}
    raise TypeError(f"a {type(value).__name__} value")


def decode(data: Any) -> Any:
    """The value :func:`encode` gave ``data`` for."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise ValueError(f"an untagged object with keys {sorted(data)}")
    tag, inner = next(iter(data.items()))
    if tag == "$float":
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[inner]
    if tag == "$tuple":
        return tuple(decode(v) for v in inner)
    if tag == "$set":
        return {decode(v) for v in inner}
    if tag == "$dict":
        return {k: decode(v) for k, v in inner.items()}
    if tag == "$failure":
        return ModelFailure(**{k: decode(v) for k, v in inner.items()})
    raise ValueError(f"an unknown tag {tag!r}")


def _fields(obj: Any) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(obj)


def phase_state(ctx: CollectContext, phase: str) -> dict[str, Any]:
    """What ``phase`` leaves for the later phases and the evidence (module docstring), encoded."""
    if phase == "topology":
        return {"topology_ok": ctx.topology_ok, "topology_reason": ctx.topology_reason}
    if phase == "profile" and ctx.profiler.profile is not None:
        return {"profile": _profile_figures(ctx.profiler.profile)}
    if phase == "ig":
        return {"attributions": encode(ctx.ig.attributions)}
    if phase == "export":
        export = ctx.export
        return {"export": export.model_dump(mode="json") if export is not None else None}
    return {}


def _profile_figures(profile: Profile) -> dict[str, Any]:
    model = {
        f.name: encode(getattr(profile, f.name))
        for f in _fields(profile)
        if f.name not in _PROFILE_OWN
    }
    # one row per operator, the field names once (a real-size model has thousands of operators)
    names = [f.name for f in dataclasses.fields(OpMeasure) if f.name not in _CAPTURED]
    rows = [[encode(getattr(m, name)) for name in names] for m in profile.ops]
    return {"model": model, "fields": names, "ops": rows}


def reusable(phase: str, state: dict[str, Any], output_dir: Path | None) -> str | None:
    """None when the saved ``state`` can be put back now; else why not (an exported file that
    is gone or changed since the phase wrote it, or not in this collect's ``output_dir``)."""
    if phase != "export" or state.get("export") is None:
        return None
    record = ExportRecord.model_validate(state["export"])
    for entry in (record.onnx, record.probe_bundle):
        path = Path(entry.path)
        if output_dir is not None and path.parent.resolve() != output_dir.resolve():
            return f"its exported {path.name} is in {path.parent}, not in {output_dir}"
        if not path.is_file():
            return f"its exported {path.name} is no longer at {path}"
        if sha256_file(path) != entry.sha256:
            return f"its exported {path.name} at {path} changed since it was written"
    return None


def restore_state(ctx: CollectContext, phase: str, state: dict[str, Any]) -> None:
    """Put back what :func:`phase_state` saved of ``phase`` into this collect's context."""
    if phase == "topology":
        ctx.topology_ok = bool(state["topology_ok"])
        ctx.topology_reason = state["topology_reason"]
    elif phase == "profile" and "profile" in state:
        profile = ctx.profiler.profile
        assert profile is not None, "the reference capture runs before a phase is reused"
        figures = state["profile"]
        if len(figures["ops"]) != len(profile.ops):
            raise CollectError(
                f"the work folder's profile measured {len(figures['ops'])} operators, this "
                f"collect's reference capture recorded {len(profile.ops)}",
                hint="collect again without --resume",
            )
        for name, value in figures["model"].items():
            setattr(profile, name, decode(value))
        names = figures["fields"]
        for measure, row in zip(profile.ops, figures["ops"], strict=True):
            for name, value in zip(names, row, strict=True):
                setattr(measure, name, decode(value))
    elif phase == "ig":
        ctx.ig.attributions = decode(state["attributions"])
    elif phase == "export" and state.get("export") is not None:
        ctx.export = ExportRecord.model_validate(state["export"])
