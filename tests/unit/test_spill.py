"""The profiler's spill files: tensors written once, read back memory-mapped, views kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _collect_models import make_spec
from test_profiler_inplace import INPLACE

from attest.collect.context import CheckSettings, CollectContext
from attest.collect.profiler import capture_reference
from attest.collect.spill import SpillFile, in_spill_file, spill_storages
from attest.spec import load_spec

CASES = [
    torch.arange(12, dtype=torch.float32).reshape(3, 4),
    torch.arange(12, dtype=torch.float32).reshape(4, 3).t(),  # not contiguous
    torch.tensor(True),
    torch.tensor([1 + 2j, -3j], dtype=torch.complex64).conj(),  # lazy conjugate bit
    torch.linspace(-1, 1, 5).to(torch.bfloat16),
    torch.empty(0, 3),
    torch.arange(7),
    torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
]


def test_put_then_seal_reads_back_every_dtype_and_layout() -> None:
    spill = SpillFile()
    refs = [spill.put(t) for t in CASES]
    spill.seal()
    for t, ref in zip(CASES, refs, strict=True):
        value = ref.value
        assert value.dtype == t.dtype and value.shape == t.shape
        assert torch.equal(value, t.resolve_conj())
        if t.numel():
            assert in_spill_file(value.data_ptr())


def test_copy_is_taken_at_put_time_and_reads_need_a_seal() -> None:
    spill = SpillFile()
    t = torch.ones(4)
    ref = spill.put(t)
    t.mul_(3.0)
    with pytest.raises(RuntimeError, match="before it was sealed"):
        _ = ref.value
    spill.seal()
    assert torch.equal(ref.value, torch.ones(4))
    with pytest.raises(RuntimeError, match="sealed"):
        spill.put(t)


def test_reuse_writes_an_unchanged_tensor_once_and_a_changed_one_again() -> None:
    spill = SpillFile()
    t = torch.ones(1000)
    first = spill.put(t, reuse=True)
    assert spill.put(t, reuse=True) is first
    size = spill.size
    t.add_(1.0)  # the version counter moves: a new copy
    second = spill.put(t, reuse=True)
    assert second is not first and spill.size > size
    assert spill.put(t) is not second  # without reuse, always a new copy
    spill.seal()
    assert torch.equal(first.value, torch.ones(1000))
    assert torch.equal(second.value, torch.full((1000,), 2.0))


def test_spill_storages_keeps_views_strides_and_aliasing() -> None:
    base = torch.randn(6, 8)
    kept = torch.randn(3)
    views = [base, base.t(), base[2:4, 1::2], base.view(48)[5:9]]
    spill, moved = spill_storages([*views, kept], keep={kept.untyped_storage().data_ptr()})
    assert id(kept) not in moved
    copies = [moved[id(v)] for v in views]
    for v, c in zip(views, copies, strict=True):
        assert c.shape == v.shape and c.stride() == v.stride()
        assert c.storage_offset() == v.storage_offset()
        assert torch.equal(c, v)
        assert in_spill_file(c.data_ptr())
    # one storage written once, the views still share it
    assert spill.size == base.untyped_storage().nbytes()
    assert copies[0].untyped_storage().data_ptr() == copies[1].untyped_storage().data_ptr()


def test_reference_run_leaves_its_tensors_in_spill_files(tmp_path: Path) -> None:
    x = torch.randn(2, 3, 6, 6)
    path = make_spec(tmp_path, INPLACE, x=x, spec_extra="repeats: 2\nthreads: 1\n")
    ctx = CollectContext(spec=load_spec(path), settings=CheckSettings())
    profile = capture_reference(ctx)
    assert ctx.operators is not None
    spilled = [
        t
        for r in ctx.operators
        for t in [*r.args, *r.kwargs.values()]
        if isinstance(t, torch.Tensor) and t.numel() > 1
    ]
    assert spilled and all(in_spill_file(t.data_ptr()) for t in spilled if t is not ctx.spec.inputs)
    for m in profile.ops:
        for box in m.outputs:
            assert box.value.numel() == 0 or in_spill_file(box.value.data_ptr())
    assert profile.reference.output is not None
    assert in_spill_file(profile.reference.output.data_ptr())
    assert profile.extra["spill_bytes"] > 0
    # the in-place chain is still seen as the operators read it: the first add_ read the
    # convolution's output scaled by 1.5, not the final (ReLU'd) tensor
    conv = next(r for r in ctx.operators if r.op == "aten.convolution.default")
    mul = next(r for r in ctx.operators if r.op == "aten.mul_.Tensor")
    conv_out = torch.ops.aten.convolution.default(*conv.args, **conv.kwargs)
    torch.testing.assert_close(mul.args[0], conv_out)
