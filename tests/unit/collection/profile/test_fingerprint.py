"""The lean repeats' fingerprint comparison: the same answers as comparing the bytes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attest.collection.capture.spill import SpillFile
from attest.collection.profile import fingerprint
from attest.collection.profile.fingerprint import HASH_MIN_BYTES, digest, same_bits
from attest.collection.profile.op_metrics import bits_equal, relative_deviation

BIG = HASH_MIN_BYTES // 4 * 8  # float32 elements: well over the hashing threshold


def _kept(t: torch.Tensor) -> Any:
    """Run 0's copy of ``t``, kept as the profiler keeps it (a sealed spill file)."""
    spill = SpillFile()
    box = spill.put(t)
    spill.seal()
    return box


class _Counting:
    """A reference holder that counts how often its kept bytes are read."""

    def __init__(self, value: torch.Tensor) -> None:
        self._value = value
        self.reads = 0
        self.digest: Any = None

    @property
    def value(self) -> torch.Tensor:
        self.reads += 1
        return self._value


def _flip_last_bit(t: torch.Tensor, index: int) -> torch.Tensor:
    out = t.clone()
    out.view(torch.int32).view(-1)[index] ^= 1
    return out


def test_one_elements_last_bit_is_found_by_the_fingerprint() -> None:
    ref = torch.randn(BIG, generator=torch.Generator().manual_seed(0))
    box = _kept(ref)
    for index in (0, BIG // 2, BIG - 1):
        changed = _flip_last_bit(ref, index)
        assert digest(changed) is not None  # the fingerprint path, not the fallback
        assert not same_bits(changed, box)
        assert relative_deviation(changed, box.value) > 0
    assert same_bits(ref.clone(), box)


def test_the_reference_is_hashed_once_and_not_read_while_runs_match() -> None:
    ref = torch.randn(BIG)
    box = _Counting(ref.clone())
    for _ in range(5):
        assert same_bits(ref.clone(), box)
    assert box.reads == 1  # the first comparison hashed run 0's copy; the rest used it
    assert not same_bits(_flip_last_bit(ref, 3), box)
    assert box.reads == 1  # a differing fingerprint needs no read to say so


def test_small_tensors_are_compared_byte_for_byte() -> None:
    ref = torch.randn(HASH_MIN_BYTES // 4 - 1)
    box = _Counting(ref.clone())
    assert same_bits(ref.clone(), box)
    assert not same_bits(_flip_last_bit(ref, 0), box)
    assert box.reads == 2 and box.digest is None


@pytest.mark.parametrize("n", [4, BIG])
def test_negative_and_positive_zero_differ_as_in_bits_equal(n: int) -> None:
    ref = torch.zeros(n)
    run = ref.clone()
    run[n // 2] = -0.0
    box = _kept(ref)
    assert same_bits(run, box) is bits_equal(run, box.value) is False
    assert same_bits(ref.clone(), box) is bits_equal(ref, box.value) is True


def test_dtype_and_shape_count_even_with_equal_bytes() -> None:
    ref = torch.randn(BIG)
    box = _kept(ref)
    assert not same_bits(ref.view(torch.int32).clone(), box)
    assert not same_bits(ref.reshape(2, -1).clone(), box)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.reshape(64, -1).t(),  # transposed: bytes not in element order
        lambda t: t.reshape(1, 8, -1, 4).to(memory_format=torch.channels_last),
        lambda t: t[::2],  # strided
    ],
)
def test_tensors_whose_bytes_are_not_in_element_order_fall_back(make: Any) -> None:
    run = make(torch.randn(BIG * 2))
    assert digest(run) is None
    box = _kept(run)  # run 0 kept a contiguous copy in element order
    assert same_bits(run, box) is bits_equal(run, box.value) is True
    assert same_bits(run.contiguous(), box)  # the same values hashed: the same fingerprint
    changed = run.clone()  # the same layout as ``run``, one element one bit further
    changed.view(torch.int32)[(0,) * run.dim()] ^= 1
    assert same_bits(changed, box) is bits_equal(changed, box.value) is False
    assert not same_bits(changed.contiguous(), box)


def test_non_dense_and_lazy_bit_tensors_use_the_exact_comparison(monkeypatch: Any) -> None:
    hashed: list[int] = []
    real = fingerprint._HASH
    monkeypatch.setattr(fingerprint, "_HASH", lambda b: hashed.append(1) or real(b))
    assert digest(torch.eye(64).to_sparse()) is None  # no bytes in element order to hash
    expanded = torch.randn(BIG // 64, 1).expand(-1, 64)  # one element's bytes, read 64 times
    assert digest(expanded) is None
    assert same_bits(expanded, _kept(expanded))
    z = torch.randn(BIG, dtype=torch.complex64)
    assert same_bits(z.conj(), _kept(z.conj()))
    assert not same_bits(z.conj(), _kept(z))
    assert hashed == []
