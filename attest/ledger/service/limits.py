"""The slow- and idle-client limits of ``attest ledger serve`` and the file descriptors they
need; no uvicorn here (the command line reads the defaults without the service installed). The
limits are enforced by :mod:`attest.ledger.service.guard`."""

from __future__ import annotations

from dataclasses import dataclass

from attest.errors import InputError

__all__ = ["FD_RESERVE", "ConnectionLimits", "connection_budget", "raise_fd_limit"]

# File descriptors kept back from the connection limit: the database connections (the sequencer
# and the read pool), the listening socket, the log, the key and what Python itself opens.
FD_RESERVE = 64


@dataclass(frozen=True)
class ConnectionLimits:
    """The slow- and idle-client limits of ``attest ledger serve`` (the CLI options' defaults)."""

    header_timeout_s: float = 10.0  # connect (or first byte after keep-alive) -> headers complete
    body_timeout_s: float = 30.0  # headers complete -> whole body received
    keepalive_timeout_s: int = 5  # idle between a response and the next request (uvicorn's)
    max_connections: int = 1000  # open connections; at the limit the longest idle is closed
    max_requests: int = 256  # requests being answered at once; beyond: 503, retryable

    def check(self) -> ConnectionLimits:
        """Refuse a limit that disables itself (the command line's ranges say the same)."""
        timeouts = (self.header_timeout_s, self.body_timeout_s, self.keepalive_timeout_s)
        if not all(0 < t <= 3600 for t in timeouts):
            raise InputError("the header, body and keep-alive timeouts must be in (0, 3600] s")
        if self.max_connections < 2 or self.max_requests < 1:
            raise InputError("--max-connections must be at least 2 and --max-requests at least 1")
        return self


def raise_fd_limit() -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (an unprivileged process
    may); returns the ``(soft, hard)`` now in force. Unix only, as the service is."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # e.g. a hard limit above the kernel's nr_open
            pass
    return soft, hard


def connection_budget(limits: ConnectionLimits, fd_soft: int) -> int:
    """The connection limit the descriptors allow: never so many connections that accepting
    one more, or opening a database connection, fails for want of a descriptor."""
    import resource

    if fd_soft == resource.RLIM_INFINITY:
        return limits.max_connections
    return max(2, min(limits.max_connections, fd_soft - FD_RESERVE))
