"""The profiler's comparison functions: exact bits, relative deviation, blockwise sums."""

from __future__ import annotations

import math

import torch

from attest.collection.profile import op_metrics as metrics
from attest.collection.profile.op_metrics import (
    bits_equal,
    relative_deviation,
    relative_error,
    squared_error_sums,
)


def test_bits_equal_decides_on_raw_bits_in_every_layout() -> None:
    a = torch.randn(4, 6)
    assert bits_equal(a, a.clone())
    assert bits_equal(a.t(), a.t().contiguous())  # different strides, same values
    b = a.clone()
    b[2, 3] = torch.nextafter(b[2, 3], torch.tensor(math.inf))
    assert not bits_equal(a, b)
    assert not bits_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert bits_equal(torch.tensor([math.nan]), torch.tensor([math.nan]))
    assert not bits_equal(a, a.double())
    assert not bits_equal(a, a.reshape(6, 4))


def test_bits_equal_and_deviation_read_lazy_conjugates_as_their_values() -> None:
    z = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    assert bits_equal(z.conj(), z.conj().resolve_conj())
    assert not bits_equal(z.conj(), z)
    assert relative_deviation(z.conj(), z.conj().resolve_conj()) == 0.0
    assert relative_deviation(z.conj(), z) > 0.0


def test_blockwise_sums_equal_the_whole_tensor_sums() -> None:
    torch.manual_seed(0)
    a = torch.randn(100_003)  # not a multiple of any block size
    ref = a.double() + 1e-7 * torch.randn(100_003, dtype=torch.float64)
    diff = a.double() - ref
    expected = (float(diff @ diff), float(ref @ ref))
    sums = squared_error_sums(a, ref)
    assert sums is not None
    assert math.isclose(sums[0], expected[0], rel_tol=1e-12)
    assert math.isclose(sums[1], expected[1], rel_tol=1e-12)
    ref[77_777] = math.inf
    assert squared_error_sums(a, ref) is None
    assert relative_error([(a, ref)]) is None


def test_relative_deviation_over_blocks_finds_the_largest_difference() -> None:
    ref = torch.ones(3 * metrics._MIN_BLOCK + 5)
    a = ref.clone()
    a[-1] = 1.5  # in the last, partial block
    a[10] = 1.25
    assert relative_deviation(a, ref) == 0.5
    a[-2] = math.nan
    assert relative_deviation(a, ref) == math.inf
