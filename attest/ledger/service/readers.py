"""The service's read connections: a small pool of :class:`PostgresStorage`, one per borrower
(the reads run in Starlette's thread pool, the cosigning rounds' proofs in anyio's)."""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Iterator

from attest.ledger.service.postgres import DatabaseUnavailable, PostgresStorage

__all__ = ["Readers"]


class Readers:
    """A small pool of read connections (one :class:`PostgresStorage` per borrower)."""

    def __init__(self, dsn: str, size: int) -> None:
        self.dsn = dsn
        self._free: queue.LifoQueue[PostgresStorage] = queue.LifoQueue()
        self._slots = queue.Queue[None]()
        for _ in range(size):
            self._slots.put(None)

    @contextlib.contextmanager
    def borrow(self) -> Iterator[PostgresStorage]:
        self._slots.get()
        try:
            try:
                storage = self._free.get_nowait()
            except queue.Empty:
                storage = PostgresStorage(self.dsn)
            try:
                yield storage
            except DatabaseUnavailable:
                storage.close()  # the others were opened to the same server: drop them too
                self.close()
                raise
            except BaseException:
                self._free.put(storage)
                raise
            self._free.put(storage)
        finally:
            self._slots.put(None)

    def close(self) -> None:
        while not self._free.empty():
            self._free.get_nowait().close()
