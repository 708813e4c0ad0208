"""The one formatter of pydantic validation errors: ``rules[2].comparator: Input should be ...``.

Specs, policies, evidence and ledger entries are validated by pydantic models; every such
error reaches a user through :func:`validation_problems`, so the same problem reads the same
in every file. Kept apart from :mod:`attest.core.strict_yaml` so that the verifier, which
reads YAML, never imports pydantic.
"""

from __future__ import annotations

from pydantic import ValidationError

from attest.core.text import safe_text

__all__ = ["validation_problems"]

_WHERE_CHARS = 200  # a key path is quoted from the file: bounded, and escaped


def validation_problems(exc: ValidationError, limit: int = 8) -> str:
    """pydantic errors as ``rules[2].comparator: Input should be ...``, joined by '; ': the
    key path (list indexes in brackets), then the problem; an unknown key reads
    ``unknown key``, a missing one ``required key is missing``. At most ``limit`` problems,
    then ``and N more``."""
    errors = exc.errors()
    parts = []
    for err in errors[:limit]:
        where = ""
        for piece in err["loc"]:
            if isinstance(piece, int):
                where += f"[{piece}]"
            else:
                where += f".{piece}" if where else str(piece)
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["type"] == "missing":
            message = "required key is missing"
        parts.append(f"{safe_text(where, _WHERE_CHARS) or '<top level>'}: {message}")
    more = len(errors) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
