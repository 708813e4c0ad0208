"""Fingerprints of the lean repeats' compared tensors: equal bytes, read once.

A lean repeat (:mod:`attest.collection.profile.repeat_capture`) asks of every operator's
outputs and computed gradients whether their bytes equal run 0's. Comparing them with run 0's
kept copy reads two buffers per tensor, one of them from the spill file's map, every repeat.
:func:`same_bits` reads the run's tensor once instead, as it is produced (still in cache), and
hashes it with XXH3-128 (the ``xxhash`` package: a fast non-cryptographic 128-bit hash), then
compares the hash with run 0's, which is computed once from the kept copy and kept with it
(:func:`reference_fingerprint`). Only where the hashes differ are run 0's bytes read again, by
the caller, for the relative deviation: differing hashes prove differing bytes.

Why a non-cryptographic hash is enough: what is compared is a run with an earlier run of the
same model in the same process, and what makes them differ is accidental (a reduction order, a
race between threads, an uninitialised buffer), not an adversary choosing bytes to collide.
For bytes that differ for such reasons, XXH3-128 gives equal hashes with probability about
2^-128 per comparison (docs/metrics.md, "Comparing by fingerprint"); a profile of 100 repeats
of a 10,000-operator model makes about 2 * 10^6 comparisons, 2^-107 in all.

Where hashing does not pay or does not apply, the tensor is compared with run 0's bytes as
before (:func:`~attest.collection.profile.op_metrics.bits_equal`): tensors under
:data:`HASH_MIN_BYTES` (a hash call's fixed cost is about a comparison's), and tensors whose
bytes are not their values in order (non-contiguous, lazily conjugated or negated, complex,
sparse or other layouts, quantized, not on the CPU). ``-0.0`` and ``+0.0`` differ in their
bytes, so they differ here as in ``bits_equal``.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import torch
import xxhash

from attest.collection.profile.op_metrics import bits_equal

__all__ = ["HASH_MIN_BYTES", "digest", "reference_fingerprint", "same_bits"]

# Below this many bytes a tensor is compared with memcmp: measured on this machine's CPU
# (docs/benchmarks.md, "Comparing by fingerprint"), hashing one buffer costs about what
# comparing two costs up to a few KiB, and from 64 KiB on half as much or less.
HASH_MIN_BYTES = 4096

_EMPTY = xxhash.xxh3_128_intdigest(b"")
_HASH = xxhash.xxh3_128_intdigest  # releases the GIL while it hashes a large buffer


def digest(t: torch.Tensor, min_bytes: int = 0) -> int | None:
    """XXH3-128 of ``t``'s bytes in element order, or None where its bytes are not its
    values in element order (see the module docstring) or are fewer than ``min_bytes``: the
    caller then compares bytes."""
    if (
        not t.is_cpu
        or t.layout is not torch.strided
        or t.is_quantized
        or t.is_complex()
        or t.is_neg()
        or not t.is_contiguous()
    ):
        return None
    nbytes = t.nbytes
    if nbytes < min_bytes:
        return None
    if nbytes == 0:
        return _EMPTY
    # a view of the tensor's own memory (no copy); the hash reads it while ``t`` is alive
    return _HASH((ctypes.c_char * nbytes).from_address(t.data_ptr()))


def reference_fingerprint(box: Any) -> tuple[torch.dtype, torch.Size, int] | None:
    """Run 0's kept tensor ``box.value``: its dtype, shape and :func:`digest`, computed on the
    first call and kept on the box (the later repeats compare with the same reference); None
    where the kept copy has no digest."""
    known = getattr(box, "digest", None)
    if known is None:
        value = box.value
        d = digest(value)
        known = (value.dtype, value.shape, d) if d is not None else False
        with contextlib.suppress(AttributeError):  # a holder without the slot: not kept
            box.digest = known
    return known if isinstance(known, tuple) else None


def same_bits(value: torch.Tensor, box: Any) -> bool:
    """True when ``value`` has run 0's (``box.value``) dtype, shape and bytes: by fingerprint
    where :func:`digest` applies and the tensor is at least :data:`HASH_MIN_BYTES`, else by
    :func:`~attest.collection.profile.op_metrics.bits_equal` on the kept bytes."""
    mine = digest(value, HASH_MIN_BYTES)
    if mine is not None:
        ref = reference_fingerprint(box)
        if ref is not None:
            return mine == ref[2] and value.dtype == ref[0] and value.shape == ref[1]
    return bits_equal(value, box.value)
