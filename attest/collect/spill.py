"""Reference tensors kept in a memory-mapped temporary file instead of tensor memory.

The profiler compares every operator's outputs and gradients of one run with another run's:
run 0 with the float64 run (fidelity), later runs with run 0 (determinism, thread count).
Holding a whole run's operator outputs and gradients as tensors costs about twice the model's
own forward+backward peak, on top of the run being measured; on a GPU it would take device
memory from the model. So a finished run's tensors are written, as they are produced, into
an unlinked temporary file (``tempfile.TemporaryFile``: nothing is left behind, even when
the process is killed) and read back through one read-only-by-convention memory map:
comparisons then read the kernel's page cache, which the kernel can write out and drop under
memory pressure, instead of anonymous memory that it cannot. Disk use is the bytes written
(about two forward+backward peaks per kept run). Put ``TMPDIR`` on a disk, not a tmpfs, for
the memory saving to be real.

Why hand-written: PyTorch's own file-backed storages (``UntypedStorage.from_file``) map a
whole named file per storage and need the size up front; here one file holds thousands of
small tensors of a run, appended as they appear.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile
import weakref
from collections.abc import Iterable
from typing import Protocol

import torch

__all__ = ["SpillFile", "SpilledTensor", "TensorRef", "in_spill_file", "spill_storages"]

# Address ranges of the live maps, for :func:`in_spill_file` (the profiler's benchmark counts
# these pages apart from tensor memory: they are page cache the kernel can evict).
_MAPS: dict[int, tuple[int, int]] = {}

_ALIGN = 64  # every tensor starts on a 64-byte boundary: any dtype view of it is aligned


class TensorRef(Protocol):
    """Something that holds one kept tensor: read it as ``.value``."""

    @property
    def value(self) -> torch.Tensor: ...


class _InMemory:
    """A tensor the spill file cannot hold (not strided, meta...): kept as a copy."""

    __slots__ = ("value",)

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


class SpilledTensor:
    """One tensor written to a :class:`SpillFile`; ``.value`` maps it back (contiguous, on
    the CPU, sharing the file's pages: read it, never write it)."""

    __slots__ = ("_file", "_nbytes", "_offset", "_value", "dtype", "shape")

    def __init__(
        self, file: SpillFile, offset: int, nbytes: int, dtype: torch.dtype, shape: torch.Size
    ) -> None:
        self._file = file
        self._offset = offset
        self._nbytes = nbytes
        self.dtype = dtype
        self.shape = shape
        self._value: torch.Tensor | None = None

    @property
    def value(self) -> torch.Tensor:
        # kept once made: a view of the map costs no tensor memory, and the repeat runs
        # compare with the same reference many times
        if self._value is None:
            self._value = self._file.read(self._offset, self._nbytes, self.dtype, self.shape)
        return self._value


class SpillFile:
    """Append-only file of tensors; :meth:`seal` maps it for reading once the run is over."""

    def __init__(self) -> None:
        # lives as long as the spill file (the maps point into it); closed when collected
        self._file = tempfile.TemporaryFile(prefix="attest-reference-")  # noqa: SIM115
        self._fd = self._file.fileno()
        weakref.finalize(self, self._file.close)  # the map keeps its own descriptor
        self.size = 0
        self._map: mmap.mmap | None = None
        self._written: dict[int, tuple[weakref.ref[torch.Tensor], int, TensorRef]] = {}
        self._storages: dict[int, int] = {}  # storage data_ptr -> offset (spill_storages)

    def put(self, tensor: torch.Tensor, *, reuse: bool = False) -> TensorRef:
        """Write the current bytes of ``tensor``; later writes to it do not change the copy.

        ``reuse``: when this very tensor object was written before and its version counter
        has not moved since, return that copy (autograd hands the gradient one node returns
        to the next node as its input). Only for tensors seen outside an ATen call: inside
        one (a dispatch mode), an in-place operator's version bump has not happened yet.
        """
        if not reuse:
            return self._put(tensor)
        seen = self._written.get(id(tensor))
        if seen is not None and seen[0]() is tensor and seen[1] == tensor._version:
            return seen[2]
        ref = self._put(tensor)
        self._written[id(tensor)] = (weakref.ref(tensor), tensor._version, ref)
        return ref

    def _put(self, tensor: torch.Tensor) -> TensorRef:
        t = tensor.detach()
        if t.layout != torch.strided or t.device.type == "meta" or t.is_quantized:
            return _InMemory(t.clone())
        if self._map is not None:
            raise RuntimeError("spill file already sealed for reading")
        flat = t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)
        if flat.device.type != "cpu":
            flat = flat.cpu()
        if flat.is_conj() or flat.is_neg():
            flat = flat.resolve_conj().resolve_neg()
        nbytes = flat.numel() * flat.element_size()
        offset = -(-self.size // _ALIGN) * _ALIGN
        if nbytes:
            self._write(flat.view(torch.uint8).numpy().data, offset)
        self.size = offset + nbytes
        return SpilledTensor(self, offset, nbytes, t.dtype, t.shape)

    def _write(self, data: memoryview, offset: int) -> None:
        if self._map is not None:
            raise RuntimeError("spill file already sealed for reading")
        written = 0
        while written < len(data):  # pwrite may write less than asked for (over 2 GiB)
            written += os.pwrite(self._fd, data[written:], offset + written)

    def put_storage(self, storage: torch.UntypedStorage) -> int:
        """Write a whole CPU storage once (by address); its offset in the file."""
        ptr = int(storage.data_ptr())
        known = self._storages.get(ptr)
        if known is not None:
            return known
        nbytes = int(storage.nbytes())
        offset = -(-self.size // _ALIGN) * _ALIGN
        if nbytes:
            self._write(memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B"), offset)
        self.size = offset + nbytes
        self._storages[ptr] = offset
        return offset

    def seal(self) -> None:
        """Map what was written; :attr:`SpilledTensor.value` works from here on."""
        self._written.clear()
        if self._map is None and self.size:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self._map = mmap.mmap(self._fd, self.size, flags=flags)
            start = torch.frombuffer(self._map, dtype=torch.uint8, count=1).data_ptr()
            _MAPS[id(self)] = (start, start + self.size)
            weakref.finalize(self, _MAPS.pop, id(self), None)

    def read(self, offset: int, nbytes: int, dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
        """The tensor written at ``offset`` (see :meth:`SpilledTensor.value`)."""
        if not nbytes:
            return torch.empty(shape, dtype=dtype)
        if self._map is None:
            raise RuntimeError("spill file read before it was sealed")
        raw = torch.frombuffer(self._map, dtype=torch.uint8, count=nbytes, offset=offset)
        return raw.view(dtype).view(shape)


def in_spill_file(ptr: int) -> bool:
    """True when address ``ptr`` lies in a live spill file's map."""
    return any(start <= ptr < end for start, end in _MAPS.values())


def spill_storages(
    tensors: Iterable[torch.Tensor], keep: set[int]
) -> tuple[SpillFile, dict[int, torch.Tensor]]:
    """Move CPU tensors' storages to a new spill file, preserving every view.

    Each storage behind ``tensors`` (except those whose address is in ``keep``: parameters,
    buffers, inputs, and except non-CPU, non-strided or quantized tensors) is written once;
    each tensor comes back as the same ``as_strided`` view of the mapped copy, so tensors
    that shared a storage still do. Returns the sealed file and ``{id(tensor): replacement}``.
    """
    spill = SpillFile()
    placed: list[tuple[torch.Tensor, int, int]] = []  # tensor, file offset, storage bytes
    for t in tensors:
        if t.device.type != "cpu" or t.layout != torch.strided or t.is_quantized:
            continue
        if t.is_conj() or t.is_neg():  # lazy bits a view of the raw bytes would drop
            continue
        storage = t.untyped_storage()
        ptr = int(storage.data_ptr())
        nbytes = int(storage.nbytes())
        if not ptr or not nbytes or ptr in keep or nbytes % t.element_size():
            continue
        placed.append((t, spill.put_storage(storage), nbytes))
    spill.seal()
    if spill._map is None:
        return spill, {}
    bases: dict[tuple[int, torch.dtype], torch.Tensor] = {}
    out: dict[int, torch.Tensor] = {}
    for t, offset, nbytes in placed:
        base = bases.get((offset, t.dtype))
        if base is None:
            count = nbytes // t.element_size()
            base = torch.frombuffer(spill._map, dtype=t.dtype, count=count, offset=offset)
            bases[(offset, t.dtype)] = base
        out[id(t)] = base.as_strided(t.shape, t.stride(), t.storage_offset())
    return spill, out
