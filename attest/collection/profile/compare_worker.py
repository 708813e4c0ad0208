"""The lean repeats' per-operator comparisons on a thread of their own, off the model's path.

A lean repeat (:mod:`attest.collection.profile.repeats`) compares every operator's outputs and
computed gradients bit for bit with run 0's. Comparing is reading: every activation and
gradient of the run and its reference, at memory bandwidth (resnet18 on 4x3x224^2: 1.2 GB a
run, about 0.2 F when the model waits for it after each operator). :class:`QueuedComparison`
is the same :class:`~attest.collection.profile.repeat_capture.RunComparison` with its calls
(``compare_outputs`` per forward operator, ``grads`` per autograd node) handed, in the order
they are made, to one worker thread: the comparison of operator ``k`` runs while the model
computes operator ``k + 1``. Both ways of comparing release the GIL (``memcmp`` through ctypes;
the XXH3-128 hash of :mod:`attest.collection.profile.fingerprint` while it hashes a large
buffer), so the thread compares while ATen computes. Nothing is kept beyond the comparison: each queued call holds the run's own
tensors until it has read them (at most :data:`MAX_PENDING_BYTES` of them; the model waits
when the worker is that far behind) and drops them after.

Same figures as inline (the tests in ``tests/unit/collection/profile/test_lean_repeats.py``
run both on planted defects): one thread runs the calls in submission order, so the
comparison's state (which storages hold differing bytes, which operators' inputs differed:
the ``origins``) evolves exactly as it does inline, and each call reads the bytes the run
produced, because nothing writes into a tensor while a call that reads it is queued:

* forward: every ATen call of the model passes the repeat capture's dispatch first
  (:meth:`before_call`); one that writes into an argument (schema ``Tensor(a!)``: ``relu_``,
  ``copy_``, ``out=``) whose storage a queued call reads waits until that call is done;
* backward: the lean repeats do not dispatch backward calls. Autograd's own in-place
  accumulation only reuses a gradient nothing else holds (a queued call holds it); built-in
  derivative formulas never write into an incoming gradient (one tensor may be handed to
  several nodes); a gradient that flows into a custom ``autograd.Function`` (whose Python
  backward could write into it) is compared inline, before the function runs;
* every compared tensor's version counter is read when the call is queued and again after it
  ran: a write that none of the above saw (a tensor hook writing into its argument, against
  PyTorch's contract) moves it, and the repeat is then run again with every comparison inline
  (``conflict``). A write through numpy or ``.data`` moves no counter; no model writes into
  its own gradients or activations that way.

CUDA tensors are compared inline (the comparison is a kernel on the device already).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attest.collection.capture.tensors import _written_args, tensor_storage
from attest.collection.profile.repeat_capture import RunComparison

__all__ = ["MAX_PENDING_BYTES", "QueuedComparison", "spare_core", "writes_arguments"]

# Bytes of the run's tensors queued calls may hold before the model waits for the worker: the
# worker compares at memory bandwidth, several times faster than a model produces tensors,
# so it is rarely reached; it bounds what the queue adds to the run's peak memory.
MAX_PENDING_BYTES = 256 << 20

_BACKWARD_C_FUNCTION = torch.autograd.function.BackwardCFunction
_MUTABLE: dict[Any, bool] = {}


def spare_core() -> bool:
    """True when this process may run on more cores than torch's intra-op threads use: only
    then does the worker have a core of its own. Where every core runs one of torch's threads,
    a third runnable thread only takes turns with them (and their OpenMP barriers wait for the
    one it displaced): measured on a 2-core machine at 2 threads, queued and inline repeats
    cost the same (docs/benchmarks.md), so there the comparisons stay inline. A worker
    process of ``collect --workers`` compares inline too: its siblings use the other cores."""
    if multiprocessing.parent_process() is not None:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return cores > torch.get_num_threads()


def writes_arguments(func: Any) -> bool:
    """True for ATen operators whose schema writes into an argument (``Tensor(a!)``)."""
    known = _MUTABLE.get(func)
    if known is None:
        schema = getattr(func, "_schema", None)
        known = bool(schema is not None and schema.is_mutable)
        _MUTABLE[func] = known
    return known


def _storage_ptr(t: torch.Tensor) -> int | None:
    storage = tensor_storage(t)
    return int(storage.data_ptr()) if storage is not None else None


class _Call:
    """One queued comparison: the call, the storages it reads and their version counters."""

    __slots__ = ("nbytes", "ptrs", "run", "versions")

    def __init__(
        self, run: Callable[[], None], tensors: Sequence[torch.Tensor | None], *, versions: bool
    ) -> None:
        self.run = run
        live = [t for t in tensors if t is not None]
        # (inside a dispatch, an in-place operator's version bump is still to come: the
        # forward's writes are watched by before_call instead)
        self.versions = [(t, t._version) for t in live] if versions else []
        self.ptrs = [p for p in (_storage_ptr(t) for t in live) if p is not None]
        self.nbytes = sum(t.nbytes for t in live)


class QueuedComparison(RunComparison):
    """:class:`RunComparison` whose calls run in order on one worker thread (module docstring).

    The thread starts with the first queued call; :meth:`finish` (after the run, also when it
    failed) waits for every queued call and stops it. ``conflict`` is then True when a compared tensor was written before
    its comparison read it: the figures are not to be used, the run is to be repeated inline.
    """

    def __init__(self, *args: Any, max_pending_bytes: int = MAX_PENDING_BYTES, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.conflict = False
        self._inline: set[int] = set()  # operators whose gradients are compared inline
        self.max_pending_bytes = max_pending_bytes
        self._queue: deque[_Call] = deque()
        self._pending: dict[int, int] = {}  # storage address -> queued calls that read it
        self._pending_bytes = 0
        self._submitted = 0
        self._done = 0
        self._closed = False
        self._error: BaseException | None = None
        self._cv = threading.Condition()
        self._thread = threading.Thread(
            target=self._work, name="attest-repeat-compare", daemon=True
        )

    # -- the model's thread ---------------------------------------------------------------------

    def compare_outputs(
        self,
        ref_id: int,
        outputs: list[torch.Tensor],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        view: bool,
    ) -> None:
        if any(t.device.type != "cpu" for t in outputs):
            self._wait(lambda: self._done == self._submitted)
            super().compare_outputs(ref_id, outputs, args, kwargs, view)
            return
        compare = super().compare_outputs
        call = _Call(lambda: compare(ref_id, outputs, args, kwargs, view), outputs, versions=False)
        self._submit(call)

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        tensors = [*grad_outputs, *grad_inputs]
        # a custom Function may write into the gradient it receives: compared before it runs
        if op_id in self._inline or any(t is not None and t.device.type != "cpu" for t in tensors):
            self._wait(lambda: self._done == self._submitted)
            super().grads(op_id, grad_outputs, grad_inputs)
            return
        compare = super().grads
        self._submit(
            _Call(lambda: compare(op_id, grad_outputs, grad_inputs), tensors, versions=True)
        )

    def hooked(self, op_id: int, node: Any) -> None:
        if any(isinstance(fn, _BACKWARD_C_FUNCTION) for fn, _ in node.next_functions):
            self._inline.add(op_id)  # its gradients flow into a custom Function's backward

    def before_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The model is about to call ``func``: if it writes into a storage that a queued
        call still has to read, wait for those calls."""
        if not self._pending or not writes_arguments(func):
            return
        written = {p for p in (_storage_ptr(t) for t in _written_args(func, args, kwargs)) if p}
        if written & self._pending.keys():
            self._wait(lambda: not (written & self._pending.keys()))

    def finish(self) -> None:
        """Wait for every queued call, stop the thread, re-raise what a call raised."""
        if self._thread.is_alive():
            with self._cv:
                self._closed = True
                self._cv.notify_all()
            self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _submit(self, call: _Call) -> None:
        if self._pending_bytes + call.nbytes > self.max_pending_bytes:
            self._wait(lambda: self._pending_bytes + call.nbytes <= self.max_pending_bytes)
        if not self._thread.is_alive() and not self._closed:
            self._thread.start()
        with self._cv:
            for ptr in call.ptrs:
                self._pending[ptr] = self._pending.get(ptr, 0) + 1
            self._pending_bytes += call.nbytes
            self._submitted += 1
            self._queue.append(call)
            self._cv.notify_all()

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self._cv:
            while not ready() and self._error is None and self._thread.is_alive():
                self._cv.wait()
        if self._error is not None:
            self.finish()

    # -- the worker thread ----------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if not self._queue:
                    return
                call = self._queue[0]
            try:
                if self._error is None:
                    with torch.no_grad():
                        call.run()
                    if any(t._version != v for t, v in call.versions):
                        self.conflict = True
            except BaseException as exc:  # handed to the model's thread by finish()
                self._error = exc
            with self._cv:
                self._queue.popleft()
                for ptr in call.ptrs:
                    left = self._pending[ptr] - 1
                    if left:
                        self._pending[ptr] = left
                    else:
                        del self._pending[ptr]
                self._pending_bytes -= call.nbytes
                self._done += 1
                self._cv.notify_all()
