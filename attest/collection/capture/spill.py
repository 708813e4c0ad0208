"""What run 0 leaves behind, kept in a memory-mapped temporary file instead of tensor memory.

The profiler compares every operator's outputs and gradients of later runs with run 0's (the
float64 run for fidelity, the repeats and the thread-count run bit for bit), and the gradient
checks re-run operators on the arguments run 0 captured. Held as tensors, all of that costs
two to three times the model's own forward+backward peak, next to every later run (the
float64 one needs twice the model's memory itself); on a GPU it would take device memory
from the model. So once run 0 is over, :func:`spill_storages` writes the storages behind
those tensors into an unlinked temporary file (``tempfile.TemporaryFile``: nothing is left
behind, even when the process is killed), maps it, and hands back each tensor as the same
view (``as_strided``) of the mapped copy: same values, strides and aliasing. Comparisons then
read the kernel's page cache, which the kernel can write out and drop under memory pressure,
instead of anonymous memory that it cannot. Disk use is the bytes written (about two to three
forward+backward peaks). Put ``TMPDIR`` on a disk, not a tmpfs, for the saving to be real.
The mapped tensors are read-only by convention: nothing in attest writes into run 0's values.

Why hand-written: PyTorch's file-backed storages (``UntypedStorage.from_file``) map one named
file per storage and need its size up front; here one file holds the thousands of storages of
a run, each written once however many tensors view it.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import tempfile
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import torch

from attest.collection.capture.tensors import tensor_storage
from attest.errors import CollectError

__all__ = [
    "PAGED_EVERY",
    "Pager",
    "SpillFile",
    "SpilledTensor",
    "TensorRef",
    "in_spill_file",
    "spill_storages",
]

# Address ranges of the live maps, for :func:`in_spill_file` (the profiler's benchmark counts
# these pages apart from tensor memory: they are page cache the kernel can evict).
_MAPS: dict[int, tuple[int, int]] = {}

_ALIGN = 64  # every storage starts on a 64-byte boundary: any dtype view of it is aligned
# Captured operators a pass reads between two releases of the map's pages (Pager): small
# enough that a few operators' values are resident, large enough that the release (one
# madvise of the whole map) costs nothing next to the work.
PAGED_EVERY = 16


class Pager:
    """Gives back the spill files' pages (``release``) every :data:`PAGED_EVERY` operators a
    pass has compared (``tick``): a pass that reads run 0's values operator by operator then
    holds a few operators' values, not every one read so far. The pages stay in the page
    cache; reading them again is a minor fault."""

    def __init__(self, release: Callable[[], None]) -> None:
        self.release = release
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % PAGED_EVERY == 0:
            self.release()


class TensorRef(Protocol):
    """Something that holds one kept tensor: read it as ``.value``."""

    @property
    def value(self) -> torch.Tensor: ...


class _InMemory:
    """A tensor a spill file cannot hold (not strided, quantized...): kept as a copy."""

    __slots__ = ("digest", "value")

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value
        self.digest: Any = None  # the repeats' fingerprint (profile/fingerprint.py), once made


class SpilledTensor:
    """One tensor copied into a :class:`SpillFile` by :meth:`SpillFile.put`; ``.value`` maps
    it back once the file is sealed (contiguous, on the CPU, sharing the file's pages)."""

    __slots__ = ("_file", "_nbytes", "_offset", "_value", "digest", "dtype", "shape")

    def __init__(
        self, file: SpillFile, offset: int, nbytes: int, dtype: torch.dtype, shape: torch.Size
    ) -> None:
        self._file = file
        self._offset = offset
        self._nbytes = nbytes
        self.dtype = dtype
        self.shape = shape
        self._value: torch.Tensor | None = None
        self.digest: Any = None  # the repeats' fingerprint (profile/fingerprint.py), once made

    @property
    def value(self) -> torch.Tensor:
        # kept once made: a view of the map costs no tensor memory, and the repeat runs
        # compare with the same reference many times
        if self._value is None:
            self._value = self._file.read(self._offset, self._nbytes, self.dtype, self.shape)
        return self._value


class SpillFile:
    """Append-only file of tensors and CPU storages; :meth:`seal` maps it for reading once
    everything is in."""

    def __init__(self) -> None:
        # lives as long as the spill file (the map points into it); closed when collected
        try:
            self._file = tempfile.TemporaryFile(prefix="attest-reference-")  # noqa: SIM115
        except OSError as exc:
            raise _no_room(exc) from None
        self._fd = self._file.fileno()
        weakref.finalize(self, self._file.close)  # the map keeps its own descriptor
        self.size = 0
        self.map: mmap.mmap | None = None
        self._offsets: dict[int, int] = {}  # storage data_ptr -> offset in the file
        self._copies: dict[int, tuple[weakref.ref[torch.Tensor], int, TensorRef]] = {}

    def put(self, tensor: torch.Tensor) -> TensorRef:
        """Copy the current bytes of ``tensor`` now (any device; later writes to it do not
        change the copy). The same tensor object, unchanged since (same version counter),
        is copied once: autograd hands the gradient one node returns to the next node. Call
        it outside ATen calls only: inside one (a dispatch mode), an in-place operator's
        version bump has not happened yet."""
        seen = self._copies.get(id(tensor))
        if seen is not None and seen[0]() is tensor and seen[1] == tensor._version:
            return seen[2]
        ref = self._copy(tensor)
        self._copies[id(tensor)] = (weakref.ref(tensor), tensor._version, ref)
        return ref

    def _copy(self, tensor: torch.Tensor) -> TensorRef:
        t = tensor.detach()
        if t.layout != torch.strided or t.device.type == "meta" or t.is_quantized:
            return _InMemory(t.clone())
        try:
            flat = t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)
            if flat.device.type != "cpu":
                flat = flat.cpu()
            if flat.is_conj() or flat.is_neg():
                flat = flat.resolve_conj().resolve_neg()
            data = flat.view(torch.uint8).numpy().data
        except (RuntimeError, TypeError, NotImplementedError):  # a subclass or dtype without
            return _InMemory(t.clone())  # plain bytes: kept as a copy in memory instead
        nbytes = flat.numel() * flat.element_size()
        offset = self._append(data, nbytes)
        return SpilledTensor(self, offset, nbytes, t.dtype, t.shape)

    def _append(self, data: memoryview, nbytes: int) -> int:
        if self.map is not None:
            raise RuntimeError("spill file already sealed for reading")
        offset = -(-self.size // _ALIGN) * _ALIGN
        written = 0
        try:
            while written < nbytes:  # pwrite may write less than asked for (over 2 GiB)
                written += os.pwrite(self._fd, data[written:], offset + written)
        except OSError as exc:  # a full disk, a quota
            raise _no_room(exc) from None
        self.size = offset + nbytes
        return offset

    def put_storage(self, storage: torch.UntypedStorage) -> int:
        """Write a whole CPU storage once; its offset in the file. Storages are known by
        their address, so every storage written must stay alive until :meth:`seal`."""
        ptr = int(storage.data_ptr())
        known = self._offsets.get(ptr)
        if known is not None:
            return known
        nbytes = int(storage.nbytes())
        data = memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B")
        offset = self._append(data, nbytes)
        self._offsets[ptr] = offset
        return offset

    def seal(self) -> None:
        """Map what was written (nothing more can be written after)."""
        self._copies.clear()
        self._offsets.clear()
        if self.map is None and self.size:
            # Not MAP_POPULATE: pages come in as the comparisons read them, so the process's
            # resident set holds what a phase reads, not the whole file (see release()).
            flags = mmap.MAP_SHARED
            try:
                self.map = mmap.mmap(self._fd, self.size, flags=flags)
            except OSError as exc:
                raise _no_room(exc) from None
            start = torch.frombuffer(self.map, dtype=torch.uint8, count=1).data_ptr()
            _MAPS[id(self)] = (start, start + self.size)
            weakref.finalize(self, _MAPS.pop, id(self), None)

    def release(self) -> None:
        """Drop the mapped pages from this process's resident set (between phases).

        The file's contents stay in the page cache (a shared file mapping loses no data to
        ``MADV_DONTNEED``); the next read faults them back in. Without this, every page a phase
        read stays counted in the process's resident size, which is what memory limits and the
        kernel's out-of-memory killer act on, although the kernel could drop it.
        """
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if self.map is not None and advice is not None:
            with contextlib.suppress(OSError):  # advice only: a refusal loses nothing
                self.map.madvise(advice)

    def read(self, offset: int, nbytes: int, dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
        """The tensor :meth:`put` copied to ``offset`` (after :meth:`seal`)."""
        if not nbytes:
            return torch.empty(shape, dtype=dtype)
        if self.map is None:
            raise RuntimeError("spill file read before it was sealed")
        raw = torch.frombuffer(self.map, dtype=torch.uint8, count=nbytes, offset=offset)
        return raw.view(dtype).view(shape)


def _no_room(exc: OSError) -> CollectError:
    return CollectError(
        f"cannot keep the profiler's reference run in a temporary file in "
        f"{tempfile.gettempdir()}: {exc.strerror or exc}",
        hint="free space there, or set TMPDIR to a directory on a disk with room for about "
        "2-4 times the memory of one forward+backward pass of the model",
    )


def in_spill_file(ptr: int) -> bool:
    """True when address ``ptr`` lies in a live spill file's map."""
    return any(start <= ptr < end for start, end in _MAPS.values())


def spill_storages(
    tensors: Iterable[torch.Tensor], keep: set[int], into: SpillFile | None = None
) -> tuple[SpillFile, dict[int, torch.Tensor]]:
    """Move CPU tensors' storages to a new spill file, preserving every view.

    Each storage behind ``tensors`` is written once, except those whose address is in
    ``keep`` and those of non-CPU, non-strided, quantized or lazily conjugated/negated
    tensors (left as they are); each moved tensor comes back as the same ``as_strided`` view
    of the mapped copy, so tensors that shared a storage still do. Writes into ``into`` (a
    new file by default) and seals it. Returns the file and ``{id(tensor): replacement}``;
    the caller swaps the replacements in.
    """
    spill = into if into is not None else SpillFile()
    placed: list[tuple[torch.Tensor, int, int]] = []  # tensor, file offset, storage bytes
    for t in tensors:
        if t.device.type != "cpu" or t.layout != torch.strided or t.is_quantized:
            continue
        if t.is_conj() or t.is_neg():  # lazy bits a view of the raw bytes would drop
            continue
        storage = tensor_storage(t)
        if storage is None:  # a tensor without a plain storage, or without memory
            continue
        ptr = int(storage.data_ptr())
        nbytes = int(storage.nbytes())
        if not nbytes or ptr in keep or nbytes % t.element_size():
            continue
        placed.append((t, spill.put_storage(storage), nbytes))
    spill.seal()
    if spill.map is None:
        return spill, {}
    bases: dict[tuple[int, torch.dtype], torch.Tensor] = {}
    out: dict[int, torch.Tensor] = {}
    for t, offset, nbytes in placed:
        try:
            base = bases.get((offset, t.dtype))
            if base is None:
                count = nbytes // t.element_size()
                base = torch.frombuffer(spill.map, dtype=t.dtype, count=count, offset=offset)
                bases[(offset, t.dtype)] = base
            out[id(t)] = base.as_strided(t.shape, t.stride(), t.storage_offset())
        except (RuntimeError, TypeError, ValueError):  # a dtype frombuffer cannot map:
            continue  # that tensor stays where it was
    return spill, out
