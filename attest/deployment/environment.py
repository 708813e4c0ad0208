"""The deployment runtime, described as plain data, and its comparison with the certified one.

Imports neither torch nor numpy: ``attest verify --check-environment`` runs on inference
servers where only onnxruntime is installed (and :func:`local_environment` works without it,
reporting the runtime as missing).

An environment is a flat dict of strings, ints and lists (it goes into the certificate's
deployment envelope as is):

``onnxruntime_version``, ``execution_provider`` (the provider the probe runs on),
``available_providers``, ``cpu_arch`` (``platform.machine()``), ``cpu_isa`` (the vector ISA
level onnxruntime's MLAS kernels dispatch on: ``avx512``, ``avx2``, ``avx``, ``sse4.2``,
``neon``, ``sve``...), ``cpu_features`` (the CPU flags that select kernels: AVX-512
sub-extensions, VNNI, AMX, FMA...), ``intra_op_threads``, ``os``.
"""

from __future__ import annotations

import importlib
import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "COMPARED_KEYS",
    "DEFAULT_FATAL",
    "EnvironmentDifference",
    "TargetMatch",
    "compare_environment",
    "cpu_description",
    "deployment_envelope",
    "local_environment",
    "match_deployment",
]

# The keys compare_environment looks at, in report order.
COMPARED_KEYS: tuple[str, ...] = (
    "cpu_arch",
    "execution_provider",
    "onnxruntime_version",
    "cpu_isa",
    "cpu_features",
    "intra_op_threads",
)
# Differences that reject a deployment unless the certificate's policy says otherwise: a
# different architecture or execution provider runs different kernels altogether. Runtime
# version, ISA level and thread count change the last bits at most, which the behavioural
# probe measures within the certified tolerance.
DEFAULT_FATAL: tuple[str, ...] = ("cpu_arch", "execution_provider")

# x86 flags that change which MLAS kernels run, highest level first.
_X86_LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("avx512", ("avx512f", "avx512bw", "avx512vl", "avx512dq")),
    ("avx2", ("avx2", "fma")),
    ("avx", ("avx",)),
    ("sse4.2", ("sse4_2",)),
)
_X86_FEATURES: frozenset[str] = frozenset(
    {
        "sse4_1",
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512dq",
        "avx512_vnni",
        "avx512_bf16",
        "avx512_fp16",
        "avx_vnni",
        "amx_tile",
        "amx_bf16",
        "amx_int8",
    }
)
_ARM_FEATURES: frozenset[str] = frozenset(
    {"asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "i8mm", "bf16", "sme"}
)


@dataclass(frozen=True)
class EnvironmentDifference:
    """One way the local runtime differs from the certified deployment envelope."""

    key: str
    certified: Any
    local: Any
    fatal: bool

    @property
    def message(self) -> str:
        """A sentence for the verifier's report."""
        severity = "fatal" if self.fatal else "not fatal under the certificate's policy"
        return f"{self.key}: certified {self.certified!r}, this machine {self.local!r} ({severity})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json`` output."""
        return {
            "key": self.key,
            "certified": self.certified,
            "local": self.local,
            "fatal": self.fatal,
            "message": self.message,
        }


def _cpuinfo_flags(text: str) -> set[str]:
    # /proc/cpuinfo lists "flags" on x86 and "Features" on ARM, once per core; the first is enough.
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


@lru_cache(maxsize=1)
def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_description(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """The CPU as onnxruntime's kernels see it: ``cpu_arch``, ``cpu_isa``, ``cpu_features``.

    Parses ``/proc/cpuinfo`` on Linux (pass ``cpuinfo_text`` to parse another machine's);
    elsewhere the ISA is ``"unknown"`` apart from ``platform.machine()``.
    """
    arch = platform.machine().lower() or "unknown"
    if arch == "amd64":
        arch = "x86_64"
    if arch == "arm64":
        arch = "aarch64"
    flags = _cpuinfo_flags(_read_cpuinfo() if cpuinfo_text is None else cpuinfo_text)
    isa = "unknown"
    features: list[str] = []
    if arch in ("x86_64", "i686", "i386", "x86"):
        features = sorted(flags & _X86_FEATURES)
        for level, required in _X86_LEVELS:
            if all(flag in flags for flag in required):
                isa = level
                break
    elif arch == "aarch64" or arch.startswith("arm"):
        features = sorted(flags & _ARM_FEATURES)
        if "sve" in flags:
            isa = "sve"
        elif "asimd" in flags or arch == "aarch64":
            isa = "neon"  # Advanced SIMD is mandatory on AArch64
    return {"cpu_arch": arch, "cpu_isa": isa, "cpu_features": features}


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_environment(
    *, threads: int | None = None, execution_provider: str = "CPUExecutionProvider"
) -> dict[str, Any]:
    """This machine's runtime, in the shape of the certified deployment envelope.

    ``threads`` is the intra-op thread count the deployed session uses; when not given it is
    onnxruntime's default (one thread per usable core), which is what a server that never
    sets it gets. ``execution_provider`` is the provider the deployment runs on; it is
    reported as missing when this onnxruntime does not offer it.
    """
    env: dict[str, Any] = {}
    try:
        ort = importlib.import_module("onnxruntime")
        env["onnxruntime_version"] = str(ort.__version__)
        available = [str(p) for p in ort.get_available_providers()]
    except ImportError:
        env["onnxruntime_version"] = None
        available = []
    env["available_providers"] = available
    env["execution_provider"] = execution_provider if execution_provider in available else None
    env.update(cpu_description())
    env["intra_op_threads"] = int(threads) if threads is not None else _usable_cpus()
    env["os"] = platform.system().lower()
    return env


def compare_environment(
    certified: dict[str, Any], local: dict[str, Any], fatal: list[str] | tuple[str, ...]
) -> list[EnvironmentDifference]:
    """Every way ``local`` differs from ``certified`` on :data:`COMPARED_KEYS`.

    A key the certificate does not record is not compared (nothing was certified about it).
    ``fatal`` names the keys whose difference rejects the deployment (the certificate's
    policy; :data:`DEFAULT_FATAL` when it names none).
    """
    fatal_keys = set(fatal)
    differences: list[EnvironmentDifference] = []
    for key in COMPARED_KEYS:
        if key not in certified:
            continue
        want = certified[key]
        have = local.get(key)
        if isinstance(want, list) and isinstance(have, list):
            same = sorted(map(str, want)) == sorted(map(str, have))
        else:
            same = want == have
        if not same:
            differences.append(
                EnvironmentDifference(key=key, certified=want, local=have, fatal=key in fatal_keys)
            )
    return differences


def deployment_envelope(
    runtime_settings: dict[str, Any],
    environment: dict[str, Any],
    fatal: list[str] | tuple[str, ...] = DEFAULT_FATAL,
) -> dict[str, Any]:
    """The certificate's deployment envelope (``attest.certificate.statement.DeploymentEnvelope``).

    ``runtime`` merges the environment the probe outputs were produced in (the compared keys
    and ``os``) with the session settings; ``targets`` names the CPU target as
    ``cpu:<arch>:<isa>``; ``fatal_differences`` are the keys ``--check-environment`` rejects on.
    """
    recorded = {k: environment[k] for k in (*COMPARED_KEYS, "os") if k in environment}
    return {
        "targets": [
            f"cpu:{recorded.get('cpu_arch', 'unknown')}:{recorded.get('cpu_isa', 'unknown')}"
        ],
        "runtime": {**recorded, **runtime_settings},
        "fatal_differences": [str(k) for k in fatal],
    }


@dataclass(frozen=True)
class TargetMatch:
    """Which certified target this machine matched (``attest verify --check-environment``).

    ``target`` is the matched target's name, or None when none matched; then ``refusal`` says
    why and ``nearest`` names the closest target. ``differences`` are those from the matched
    target (all non-fatal), or from the nearest one.
    """

    target: str | None
    differences: list[EnvironmentDifference]
    nearest: str | None = None
    refusal: str | None = None


def _candidates(deployment: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    per_target = deployment.get("per_target")
    if isinstance(per_target, dict) and per_target:
        return [(str(name), dict(env)) for name, env in per_target.items()]
    targets = deployment.get("targets") or []
    name = "+".join(map(str, targets)) if targets else "the certified target"
    return [(name, {**deployment, "verdict": "pass"})]


def match_deployment(deployment: dict[str, Any]) -> TargetMatch:
    """Match this machine to one of the certificate's targets.

    A certificate over several targets lists them in ``deployment.per_target``; otherwise the
    deployment envelope is the one target. A target matches when no fatal key differs; among
    several, the one with the fewest differences wins (then the first listed). A match to a
    target that failed its policy is refused: the certificate does not cover that hardware.
    """
    scored: list[tuple[int, int, int, str, dict[str, Any], list[EnvironmentDifference]]] = []
    for order, (name, env) in enumerate(_candidates(deployment)):
        runtime = dict(env.get("runtime") or {})
        fatal = list(env.get("fatal_differences") or DEFAULT_FATAL)
        local = local_environment(
            threads=runtime.get("intra_op_threads"),
            execution_provider=runtime.get("execution_provider", "CPUExecutionProvider"),
        )
        differences = compare_environment(runtime, local, fatal)
        fatal_count = sum(1 for d in differences if d.fatal)
        scored.append((fatal_count, len(differences), order, name, env, differences))
    scored.sort(key=lambda c: c[:3])
    for fatal_count, _, _, name, env, differences in scored:
        if fatal_count == 0 and env.get("verdict") == "pass":
            return TargetMatch(target=name, differences=differences)
    fatal_count, _, _, name, env, differences = scored[0]
    if fatal_count == 0:
        refusal = (
            f"this machine matches target {name}, which failed the certificate's policy; "
            "the certificate does not cover this hardware"
        )
    else:
        listed = "; ".join(d.message for d in differences if d.fatal)
        refusal = f"no certified target matches this machine; the nearest is {name}: {listed}"
    return TargetMatch(target=None, differences=differences, nearest=name, refusal=refusal)
