"""Every user-facing failure of gradient-attest is an :class:`AttestError`.

Each error carries a message saying what went wrong and what to do about it, and an exit
code. The command line catches :class:`AttestError` in exactly one place
(``attest.cli.main``) and prints :meth:`AttestError.diagnostics`; nothing else reaches a user.

Exit codes: 0 success, 1 a negative verdict (policy failed, certificate rejected: an
outcome the commands report and exit with, not an error), 2 bad input or usage.
"""

from __future__ import annotations

__all__ = [
    "AttestError",
    "CollectError",
    "ConfigError",
    "EvidenceError",
    "InputError",
    "KeyError_",
    "LedgerError",
    "PolicyError",
    "SigningError",
]

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_BAD_INPUT = 2


class AttestError(Exception):
    """Base of every error gradient-attest shows to a user.

    ``message`` says what is wrong; ``hint`` (optional) says what to do.
    """

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def diagnostics(self) -> str:
        """The text shown to a user: the problem, then what to do about it."""
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class InputError(AttestError):
    """A file or argument the user gave cannot be used (missing, unreadable, malformed)."""


class ConfigError(InputError):
    """A spec, policy or trust file is invalid; the message names the file and the key."""


class KeyError_(InputError):  # trailing underscore: the builtin KeyError is unrelated
    """A signing or verification key cannot be loaded or used."""


class SigningError(AttestError):
    """Producing a signature failed."""


class EvidenceError(InputError):
    """An evidence or findings file is malformed or inconsistent."""


class PolicyError(ConfigError):
    """A policy file is invalid."""


class CollectError(AttestError):
    """Collecting evidence could not proceed at all (as opposed to a check that failed)."""


class LedgerError(AttestError):
    """The audit ledger is unreadable, inconsistent or cannot be written."""


class CertificateRejected(AttestError):
    """A certificate given to act on (co-sign, archive) does not verify: a negative verdict."""

    exit_code = EXIT_NEGATIVE
