"""The per-operator figures of docs/metrics.md ("Per operator") as small pure functions.

Each figure has exactly one definition here; the profiler and the checks call these and
nothing else computes them.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

from attest.collection.nonfinite import NonFinite, one_sided_nonfinite

__all__ = [
    "UNIT_ROUNDOFF",
    "bits_equal",
    "compared_error",
    "fidelity_pct",
    "relative_deviation",
    "relative_error",
    "squared_error_sums",
    "stability_score",
    "tensor_sha256",
    "tensors_sha256",
]

# Unit roundoff u = 2^-p of each precision (p = significand bits incl. the implicit one).
UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "bfloat16": 2.0**-8,
    "float16": 2.0**-11,
}

_JUST_BELOW_100 = math.nextafter(100.0, 0.0)


def stability_score(max_relative_deviation: float, *, bit_exact: bool, precision: str) -> float:
    """Stability score in [0, 100] (docs/metrics.md, ``stability_score``).

    ``100`` if and only if every run was bit-exact. Otherwise, with ``d`` the largest relative
    deviation between runs and ``u`` the unit roundoff of the deployed precision::

        100 * (1 - min(1, log10(1 + d/u) / log10(1 + 1/u)))

    so one unit roundoff of disagreement costs about 4 points in float32, and a deviation as
    large as the values themselves (``d >= 1``) scores 0. Runs that differ only in bits the
    deviation cannot see (``-0.0`` against ``+0.0``, NaN payloads) score just below 100, never
    100.
    """
    if bit_exact:
        return 100.0
    u = UNIT_ROUNDOFF[precision]
    d = max_relative_deviation
    if math.isnan(d) or math.isinf(d):
        return 0.0
    score = 100.0 * (1.0 - min(1.0, math.log10(1.0 + d / u) / math.log10(1.0 + 1.0 / u)))
    return min(score, _JUST_BELOW_100)


def fidelity_pct(relative_err: float | None) -> float | None:
    """``100 * (1 - min(1, ||g - g64|| / ||g64||))``; None when the error is unknown."""
    if relative_err is None or math.isnan(relative_err):
        return None
    return 100.0 * (1.0 - min(1.0, relative_err))


_INT_OF_SIZE = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


def _bit_view(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.detach().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat.resolve_conj().resolve_neg()).reshape(-1)
    if flat.is_floating_point():
        size = flat.element_size()
        return flat.view(_INT_OF_SIZE[size])
    return flat


def _load_memcmp() -> Any:
    """libc's ``memcmp``, or None where it cannot be loaded.

    Why hand-written: ``torch.equal`` on CPU compares element by element through
    TensorIterator, 5-9 times slower than ``memcmp`` on the same bytes (measured on the
    profiler's repeat runs, where comparing every operator's output and gradient with run 0
    dominated the cost). Only used for dense CPU tensors of identical layout, where equal
    raw bytes is exactly what ``memcmp`` decides.
    """
    try:
        libc = ctypes.CDLL(None) if sys.platform != "win32" else ctypes.cdll.msvcrt
        func = libc.memcmp
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_int
    func.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return func


_MEMCMP = _load_memcmp()


def _dense_same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device.type != "cpu" or b.device.type != "cpu" or a.stride() != b.stride():
        return False
    if a.is_conj() or b.is_conj() or a.is_neg() or b.is_neg():  # lazy bits: bytes != values
        return False
    return (a.is_contiguous() and b.is_contiguous()) or (
        a.dim() == 4
        and a.is_contiguous(memory_format=torch.channels_last)
        and b.is_contiguous(memory_format=torch.channels_last)
    )


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` have the same dtype, shape and raw bytes (NaN == NaN, -0 != +0).

    Dense CPU tensors of the same layout are compared with ``memcmp``; otherwise
    floating-point values are reinterpreted as integers of the same width (``Tensor.view``
    with a dtype of the same size works on any strides, without a copy) and compared with
    one ``torch.equal``.
    """
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    # fast path, the profiler's common case (a run's tensor against its contiguous reference):
    # a handful of attribute reads before the memcmp, the rest of this function costs more
    # than comparing a small activation
    if (
        _MEMCMP is not None
        and a.is_cpu
        and b.is_cpu
        and not a.is_complex()
        and not a.is_neg()
        and not b.is_neg()
        and a.is_contiguous()
        and b.is_contiguous()
    ):
        nbytes = a.nbytes
        return nbytes == 0 or int(_MEMCMP(a.data_ptr(), b.data_ptr(), nbytes)) == 0
    if a.device != b.device:
        b = b.to(a.device)
    if _MEMCMP is not None and _dense_same_layout(a, b):
        nbytes = a.numel() * a.element_size()
        return nbytes == 0 or int(_MEMCMP(a.data_ptr(), b.data_ptr(), nbytes)) == 0
    if a.is_complex():
        a = torch.view_as_real(a.detach().resolve_conj().resolve_neg())
        b = torch.view_as_real(b.detach().resolve_conj().resolve_neg())
    if a.is_floating_point():
        as_int = _INT_OF_SIZE[a.element_size()]
        return bool(torch.equal(a.detach().view(as_int), b.detach().view(as_int)))
    return bool(torch.equal(a, b))


# Blocks of the float64 comparisons below: the float64 copies and differences they need are
# made one block at a time, so comparing an operator's output costs scratch memory of a
# fraction of it, not several float64 copies (that scratch was the largest term of the
# profiler's peak memory during its float64 run). ``block`` elements per block when given
# (the profiler sizes it from the model's activations), else at least 16Ki elements (128 KiB
# in float64) and at most 1/32 of the tensor.
_MIN_BLOCK = 1 << 14
_BLOCKS_PER_TENSOR = 32


def _blocks(
    a: torch.Tensor, b: torch.Tensor, block: int | None = None
) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """Matching flat blocks of ``a`` and ``b`` (same shape), ``b`` on ``a``'s device."""
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    n = fa.numel()
    size = block if block is not None else max(_MIN_BLOCK, -(-n // _BLOCKS_PER_TENSOR))
    if size >= n:
        yield fa, fb.to(fa.device)
        return
    for start in range(0, n, size):
        yield fa[start : start + size], fb[start : start + size].to(fa.device)


def relative_deviation(a: torch.Tensor, reference: torch.Tensor) -> float:
    """``max|a - ref| / max|ref|`` in float64, over elements whose bits differ.

    Elements where one side is NaN or infinite and the bits differ count as an infinite
    deviation. Shape or dtype mismatch is infinite as well.
    """
    if a.shape != reference.shape or a.dtype != reference.dtype:
        return math.inf
    if a.numel() == 0:
        return 0.0
    if not (a.is_floating_point() or a.is_complex()):
        return 0.0 if bool(torch.equal(a, reference.to(a.device))) else math.inf
    wide = torch.complex128 if a.is_complex() else torch.float64
    worst = scale = 0.0
    for block_a, block_r in _blocks(a, reference):
        same = _bit_view(block_a) == _bit_view(block_r)
        if a.is_complex():
            same = same.reshape(-1, 2).all(dim=1)
        # In place where the dtype allows, and the scale from the unwidened reference (|r| is
        # exact in any precision): with every operator differing in its last bits (threads)
        # this ran once per operator and output and dominated the thread-count run.
        diff = block_a.to(wide).sub_(block_r.to(wide))
        diff = diff.abs() if diff.is_complex() else diff.abs_()
        block_worst = float(diff.masked_fill_(same, 0.0).max())
        if math.isnan(block_worst) or math.isinf(block_worst):
            return math.inf
        worst = max(worst, block_worst)
        magnitude = block_r.abs()
        scale = max(scale, float(magnitude.masked_fill_(~torch.isfinite(magnitude), 0.0).max()))
    if worst == 0.0:
        return 0.0
    return worst / scale if scale > 0.0 else math.inf


def _real_view(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its (real, imaginary) pairs; a real one as it is."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def squared_error_sums(
    a: torch.Tensor, ref: torch.Tensor, *, block: int | None = None
) -> tuple[float, float] | None:
    """``(||a - ref||^2, ||ref||^2)`` in float64, or None when either side holds NaN or Inf.

    One fused pass per term and block (``torch.dot`` of the flattened difference with itself
    and of the reference with itself): a non-finite element makes a sum non-finite, so no
    separate ``isfinite`` scan is needed. (Finite values above ~1e154 would overflow the
    square and read as undefined too; no activation or gradient of a working model is that
    large.)
    """
    if a.is_complex() or ref.is_complex():  # |z|^2 sums: as (real, imaginary) pairs
        if not (a.is_complex() and ref.is_complex()):
            a, ref = a.to(torch.complex128), ref.to(torch.complex128)
        a, ref = _real_view(a), _real_view(ref)
    num = den = 0.0
    for block_a, block_r in _blocks(a, ref, block):
        r = block_r.to(torch.float64)
        # one float64 temporary, made by an exact widening copy and subtracted into in place:
        # 4-5x faster on CPU than a mixed-dtype ``torch.sub`` (whose promoting loop is not
        # vectorized) or than a second fresh allocation, same bits
        diff = block_a.to(torch.float64, copy=True)
        diff.sub_(r)
        num += float(torch.dot(diff, diff))
        den += float(torch.dot(r, r))
    if not (math.isfinite(num) and math.isfinite(den)):
        return None
    return num, den


def relative_error(
    values: Iterable[tuple[torch.Tensor, torch.Tensor]],
    *,
    block: int | None = None,
    floor: float | Callable[[float], float] = 0.0,
) -> float | None:
    """``||a - ref|| / max(||ref||, floor)`` (2-norms in float64) over all pairs together.

    None when a pair holds non-finite values or mismatched shapes (the error is then not
    defined); 0 when both sides are all zero; infinite when only the reference (and the
    floor) is zero. ``floor`` may be a function of ``||ref||^2`` (once the sums are known: the
    caller gets the reference's norm without a second pass over it).
    """
    num = 0.0
    den = 0.0
    seen = False
    for a, ref in values:
        if a.shape != ref.shape:
            return None
        sums = squared_error_sums(a, ref, block=block)
        if sums is None:
            return None
        num += sums[0]
        den += sums[1]
        seen = True
    if not seen:
        return None
    low = floor(den) if callable(floor) else floor
    den = max(den, low * low)
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return math.sqrt(num / den)


def compared_error(
    values: Iterable[tuple[torch.Tensor, torch.Tensor]],
    sides: tuple[str, str],
    *,
    block: int | None = None,
    floor: float | Callable[[float], float] = 0.0,
) -> tuple[float | None, NonFinite | None]:
    """:func:`relative_error` of the ``(a, ref)`` pairs, and None; or, where it is undefined
    because one side (``sides``: the names of ``a``'s and ``ref``'s) holds a NaN or infinity
    where the other is finite, infinity and that side (attest.collection.nonfinite).

    Non-finite values both sides hold at the same elements leave the error undefined (None)
    as before: the computation repeats them, and ``numerics`` reports them. An infinity in
    ``a`` where ``ref`` is beyond ``a``'s largest finite value, with the same sign, is ``a``'s
    precision rounding ``ref`` as IEEE overflow does, and counts as agreement there."""
    pairs = list(values)
    error = relative_error(pairs, block=block, floor=floor)
    if error is not None:
        return error, None
    cut: list[tuple[torch.Tensor, torch.Tensor]] = []
    for a, ref in pairs:
        if a.shape != ref.shape:
            continue
        a, ref = a.detach(), ref.detach().to(a.device)
        if a.is_floating_point() and ref.is_floating_point() and a.dtype != ref.dtype:
            top = torch.finfo(a.dtype).max
            overflow = torch.isinf(a) & (ref.abs() > top) & (torch.sign(a) == torch.sign(ref))
            if bool(overflow.any()):  # both sides counted infinite there
                ref = torch.where(overflow, a.to(ref.dtype), ref)
        cut.append((a, ref))
    bad = one_sided_nonfinite({sides[0]: [a for a, _ in cut], sides[1]: [r for _, r in cut]})
    return (math.inf, bad) if bad is not None else (None, None)


def tensor_sha256(tensor: torch.Tensor, digest: hashlib._Hash | None = None) -> hashlib._Hash:
    """Feed dtype, shape and raw bytes of ``tensor`` into a sha256 (a new one unless given)."""
    h = digest if digest is not None else hashlib.sha256()
    t = tensor.detach()
    h.update(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)};".encode())
    if t.numel():
        raw = t.reshape(-1).contiguous().cpu().view(torch.uint8)
        h.update(raw.numpy().data)
    return h


def tensors_sha256(tensors: Iterable[torch.Tensor | None]) -> str:
    """sha256 over several tensors in order (None entries marked as such)."""
    h = hashlib.sha256()
    for t in tensors:
        if t is None:
            h.update(b"none;")
        else:
            tensor_sha256(t, h)
    return h.hexdigest()
