"""Models compiled with ``torch.compile``: unwrapped for the checks, their weights accepted.

``torch.compile(model)`` returns an ``OptimizedModule`` that holds the model as ``_orig_mod``
and runs its forward through TorchDynamo; ``model.compile()`` compiles in place. The checks
need the eager module: they run it under a dispatch mode, hook its submodules, copy it, cast
it to float64 and call it with perturbed inputs, and a compiled graph would be recompiled or
bypassed at each of those. So :func:`unwrap_compiled` replaces every compiled module of a
factory's model (the model itself or any submodule) by its original module, and returns what
was compiled and how (backend, mode, fullgraph, dynamic, as far as torch keeps them: they are
private attributes of TorchDynamo, read defensively, ``None`` when absent). What is
certified is the eager module's gradients with the same weights; the evidence records the
compile settings (``Evidence.compile``) so that a reviewer knows the deployed model runs
compiled.

A state dict saved from a compiled module names every key with an ``_orig_mod.`` segment
(``_orig_mod.conv.weight``). :func:`strip_compile_prefix` removes that segment from every key
(and from the state dict's version metadata) when the model the factory builds, unwrapped,
has no such key, so weights saved from the compiled model load into the eager one; the
evidence notes that the prefix was stripped.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

__all__ = ["PREFIX", "CompileInfo", "strip_compile_prefix", "unwrap_compiled"]

PREFIX = "_orig_mod"  # the attribute an OptimizedModule keeps the original module under

# torch._inductor.list_mode_options(mode) for the modes of torch.compile: the options an
# inductor backend was given identify its mode
_MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class CompileInfo:
    """What of the factory's model was compiled, and how (``None``: torch does not say)."""

    modules: tuple[str, ...] = ()  # dotted paths of the compiled modules ("": the model itself)
    backend: str | None = None
    mode: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    stripped_keys: int = 0  # weight keys whose "_orig_mod." segment was removed to load them

    @property
    def compiled(self) -> bool:
        return bool(self.modules)

    def note(self) -> str:
        parts = []
        if self.modules:
            where = ", ".join(repr(m) if m else "the model" for m in self.modules)
            how = ", ".join(
                f"{k}={v}"
                for k, v in (
                    ("backend", self.backend),
                    ("mode", self.mode),
                    ("fullgraph", self.fullgraph),
                    ("dynamic", self.dynamic),
                )
                if v is not None
            )
            parts.append(
                f"torch.compile'd ({where}{'; ' + how if how else ''}): the checks ran the "
                "original eager module (_orig_mod) with the same weights"
            )
        if self.stripped_keys:
            parts.append(
                f"the weights were saved from a compiled module: the {PREFIX}. prefix of "
                f"{self.stripped_keys} keys was removed to load them into the eager module"
            )
        return "; ".join(parts)


def _is_optimized(module: Any) -> bool:
    from torch import nn

    return type(module).__name__ == "OptimizedModule" and isinstance(
        getattr(module, PREFIX, None), nn.Module
    )


def _settings(optimized: Any) -> dict[str, Any]:
    """backend, mode, fullgraph and dynamic of an OptimizedModule, from TorchDynamo's private
    attributes (each read defensively: a torch release that moves one gives None)."""
    found: dict[str, Any] = {}
    context = getattr(optimized, "dynamo_ctx", None)
    fullgraph = getattr(context, "fullgraph", None)
    found["fullgraph"] = fullgraph if isinstance(fullgraph, bool) else None
    dynamic = getattr(context, "_dynamic", None)
    found["dynamic"] = dynamic if isinstance(dynamic, bool) else None
    backend: Any = getattr(context, "callback", None)
    name = None
    options = None
    for _ in range(8):  # the callback wraps the backend in a few layers, each keeping the next
        if backend is None:
            break
        for attribute in ("_compiler_name", "compiler_name", "name"):
            value = getattr(backend, attribute, None)
            if isinstance(value, str) and name is None:
                name = value
        config = getattr(backend, "config", None)
        if isinstance(config, dict) and options is None:
            options = config
        backend = getattr(backend, "_torchdynamo_orig_backend", None)
    found["backend"] = name
    found["mode"] = _mode_of(options) if name == "inductor" else None
    return found


def _mode_of(options: dict[str, Any] | None) -> str | None:
    if not options:
        return "default"
    try:
        from torch._inductor import list_mode_options
    except ImportError:
        return None
    for mode in _MODES:
        if dict(list_mode_options(mode)) == options:
            return mode
    return None  # options of its own, not a named mode


def unwrap_compiled(model: nn.Module) -> tuple[nn.Module, CompileInfo]:
    """``model`` with every compiled module replaced by its original (``model.compile()``'s
    in-place compilation undone), and what was compiled (the first compiled module's
    settings: one model is compiled one way in practice)."""
    paths: list[str] = []
    settings: dict[str, Any] = {}

    def seen(path: str, optimized: Any) -> None:
        paths.append(path)
        if not settings:
            settings.update(_settings(optimized))

    while _is_optimized(model):
        seen("", model)
        model = getattr(model, PREFIX)

    def visit(module: nn.Module, prefix: str) -> None:
        if getattr(module, "_compiled_call_impl", None) is not None:  # model.compile()
            module._compiled_call_impl = None
            paths.append(prefix)
        for name, child in list(module._modules.items()):
            if child is None:
                continue
            path = f"{prefix}.{name}" if prefix else name
            while _is_optimized(child):
                seen(path, child)
                child = getattr(child, PREFIX)
                module._modules[name] = child
            visit(child, path)

    visit(model, "")
    return model, CompileInfo(
        modules=tuple(dict.fromkeys(paths)),
        backend=settings.get("backend"),
        mode=settings.get("mode"),
        fullgraph=settings.get("fullgraph"),
        dynamic=settings.get("dynamic"),
    )


def _stripped(key: str) -> str:
    return ".".join(part for part in key.split(".") if part != PREFIX)


def strip_compile_prefix(state: dict[str, Any], model_keys: set[str]) -> tuple[dict[str, Any], int]:
    """``state`` with the ``_orig_mod.`` segment removed from every key (and from its version
    metadata), and how many keys had it; ``state`` itself when no key has it or the model's
    own keys do."""
    marked = [k for k in state if PREFIX in k.split(".")]
    if not marked or any(PREFIX in k.split(".") for k in model_keys):
        return state, 0
    out: dict[str, Any] = OrderedDict((_stripped(k), v) for k, v in state.items())
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        # the compiled wrapper's own entry ("") gives way to its original module's ("_orig_mod")
        renamed = OrderedDict((k, v) for k, v in metadata.items() if PREFIX not in k.split("."))
        for key, value in metadata.items():
            if PREFIX in key.split("."):
                renamed[_stripped(key)] = value
        out._metadata = renamed  # type: ignore[attr-defined]
    return out, len(marked)
