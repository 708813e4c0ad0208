"""The profiler's spill files: tensors written once, read back memory-mapped, views kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _collect_models import make_spec
from test_profiler_inplace import INPLACE

from attest.collection.capture.spill import (
    PAGED_EVERY,
    Pager,
    SpillFile,
    in_spill_file,
    spill_storages,
)
from attest.collection.context import CheckSettings, CollectContext
from attest.collection.profile.profiler import capture_reference
from attest.spec import load_spec

CASES = [
    torch.arange(12, dtype=torch.float32).reshape(3, 4),
    torch.arange(12, dtype=torch.float32).reshape(4, 3).t(),  # not contiguous
    torch.tensor(True),
    torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
    torch.linspace(-1, 1, 5).to(torch.bfloat16),
    torch.arange(7),
    torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
]


def test_every_dtype_and_layout_comes_back_equal_from_the_map() -> None:
    spill, moved = spill_storages(CASES, keep=set())
    for t in CASES:
        copy = moved[id(t)]
        assert copy.dtype == t.dtype and copy.shape == t.shape and copy.stride() == t.stride()
        assert torch.equal(copy, t)
        assert in_spill_file(copy.data_ptr())
    assert spill.size >= sum(t.untyped_storage().nbytes() for t in CASES)


def test_tensors_it_cannot_map_are_left_alone() -> None:
    z = torch.tensor([1 + 2j], dtype=torch.complex64).conj()  # lazy conjugate bit
    empty = torch.empty(0, 3)
    spill, moved = spill_storages([z, empty], keep=set())
    assert moved == {} and spill.size == 0
    spill = SpillFile()
    spill.seal()
    spill.put_storage(torch.ones(2).untyped_storage())  # nothing written: still writable
    spill.seal()
    with pytest.raises(RuntimeError, match="sealed"):
        spill.put_storage(torch.ones(2).untyped_storage())


def test_put_copies_now_and_reads_back_after_the_seal() -> None:
    spill = SpillFile()
    t = torch.ones(4)
    ref = spill.put(t)
    t.mul_(3.0)  # a later write does not reach the copy...
    again = spill.put(t)  # ...and a changed tensor is copied again
    assert again is not ref
    assert spill.put(t) is again  # unchanged since: the same copy
    cases = [spill.put(c) for c in CASES]
    with pytest.raises(RuntimeError, match="before it was sealed"):
        _ = ref.value
    spill.seal()
    assert torch.equal(ref.value, torch.ones(4))
    assert torch.equal(again.value, torch.full((4,), 3.0))
    for c, r in zip(CASES, cases, strict=True):
        assert torch.equal(r.value, c) and in_spill_file(r.value.data_ptr())
    with pytest.raises(RuntimeError, match="sealed"):
        spill.put(torch.zeros(2))


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
    assert profile.spill_bytes > 0
    # the in-place chain is still seen as the operators read it: the first add_ read the
    # convolution's output scaled by 1.5, not the final (ReLU'd) tensor
    conv = next(r for r in ctx.operators if r.op == "aten.convolution.default")
    mul = next(r for r in ctx.operators if r.op == "aten.mul_.Tensor")
    conv_out = torch.ops.aten.convolution.default(*conv.args, **conv.kwargs)
    torch.testing.assert_close(mul.args[0], conv_out)


def test_run_0_digests_give_back_the_spill_pages_as_they_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashing run 0's outputs and gradients reads the whole spill file: its pages are given
    back every PAGED_EVERY operators, not held to the end of the capture."""
    from attest.collection.capture import spill as spill_module
    from attest.collection.profile import profiler

    releases: list[int] = []
    real = spill_module.SpillFile.release

    def counting(self: spill_module.SpillFile) -> None:
        releases.append(1)
        real(self)

    monkeypatch.setattr(spill_module.SpillFile, "release", counting)
    monkeypatch.setattr(profiler, "PAGED_EVERY", 2)
    path = make_spec(tmp_path, INPLACE, x=torch.randn(2, 3, 6, 6), spec_extra="repeats: 2\n")
    profile = capture_reference(CollectContext(spec=load_spec(path), settings=CheckSettings()))
    assert len(profile.ops) > 4
    assert len(releases) >= -(-len(profile.ops) // 2)
    assert all(m.output_sha256 for m in profile.ops)
    # and by bytes read: operators larger than the budget are hashed one per release
    monkeypatch.setattr(profiler, "PAGED_EVERY", 1000)
    monkeypatch.setattr(profiler, "_DIGEST_BYTES", 1)
    assert [len(c) for c in profiler._chunks(profile.ops)] == [1] * len(profile.ops)


def test_the_float64_run_starts_with_run_0_spilled_and_the_heap_given_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The float64 run is the collect's largest: before its model is built, run 0's values
    are in the spill file (not tensor memory), their pages given back, the heap trimmed."""
    from attest.collection.profile import float64_pass

    path = make_spec(tmp_path, INPLACE, x=torch.randn(2, 3, 6, 6), spec_extra="repeats: 2\n")
    ctx = CollectContext(spec=load_spec(path), settings=CheckSettings())
    profile = capture_reference(ctx)
    events: list[str] = []
    spill = profile.spills[0]
    real_release, real_fresh = spill.release, ctx.fresh_model

    def release() -> None:
        events.append("pages")
        real_release()

    def trim() -> None:
        spilled = all(
            box.value.numel() == 0 or in_spill_file(box.value.data_ptr())
            for m in profile.ops
            for box in m.outputs
        )
        events.append(f"trim spilled={spilled}")

    def fresh(dtype: torch.dtype | None = None) -> torch.nn.Module:
        events.append(f"model {dtype}")
        return real_fresh(dtype)

    monkeypatch.setattr(spill, "release", release)
    monkeypatch.setattr(float64_pass, "release_memory", trim)
    monkeypatch.setattr(ctx, "fresh_model", fresh)
    float64_pass.measure_fidelity(ctx, profile)
    assert events[:3] == ["pages", "trim spilled=True", "model torch.float64"]
    assert all(m.out_err is not None for m in profile.ops if m.float64_aligned and m.outputs)


def test_narrow_and_unsigned_dtypes_round_trip_bit_for_bit() -> None:
    values = torch.linspace(-3, 3, 12)
    tensors = [
        values.to(torch.float8_e4m3fn),
        values.abs().to(torch.uint16),
        values.abs().to(torch.uint32),
        values.to(torch.float16),
        values.to(torch.int8),
    ]
    spill = SpillFile()
    refs = [spill.put(t) for t in tensors]
    _, moved = spill_storages(tensors, keep=set(), into=spill)  # also seals `spill`
    for t, ref in zip(tensors, refs, strict=True):
        for copy in (ref.value, moved[id(t)]):
            assert copy.dtype == t.dtype
            assert torch.equal(copy.view(torch.uint8), t.view(torch.uint8))


def test_a_full_disk_is_a_clear_collect_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    from attest.errors import CollectError

    def no_space(*args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    spill = SpillFile()
    monkeypatch.setattr(os, "pwrite", no_space)
    with pytest.raises(CollectError, match="No space left") as info:
        spill.put(torch.ones(3))
    assert info.value.hint is not None and "TMPDIR" in info.value.hint


def test_an_unwritable_temporary_directory_is_a_clear_collect_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tempfile

    from attest.errors import CollectError

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "does-not-exist"))
    with pytest.raises(CollectError, match="temporary file"):
        SpillFile()


def test_pages_given_back_read_again_bit_for_bit(tmp_path: Path) -> None:
    x = torch.randn(2, 3, 6, 6)
    path = make_spec(tmp_path, INPLACE, x=x, spec_extra="repeats: 2\nthreads: 1\n")
    ctx = CollectContext(spec=load_spec(path), settings=CheckSettings())
    profile = capture_reference(ctx)
    before = [box.value.clone() for m in profile.ops for box in m.outputs]
    ctx.release_spill_pages()  # the map's pages leave the resident set, not the file
    after = [box.value for m in profile.ops for box in m.outputs]
    assert before and all(
        a.contiguous().view(torch.uint8).equal(b.contiguous().view(torch.uint8))
        for a, b in zip(before, after, strict=True)
        if a.numel()
    )


def test_pager_releases_every_paged_every_ticks_and_paged_walks_every_record() -> None:
    calls: list[int] = []
    pager = Pager(lambda: calls.append(pager.ticks))
    for _ in range(2 * PAGED_EVERY + 3):
        pager.tick()
    assert calls == [PAGED_EVERY, 2 * PAGED_EVERY]
    ctx = CollectContext(spec=None, settings=CheckSettings())  # type: ignore[arg-type]
    released: list[int] = []
    ctx.release_spill_pages = lambda: released.append(1)  # type: ignore[method-assign]
    assert list(ctx.paged(range(40))) == list(range(40)) and len(released) == 2
