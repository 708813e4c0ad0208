"""``logs.yaml``: the logs a witness cosigns, each known by its origin and its key::

    logs:
      - origin: ledger.example.org/clinical
        key: keys/ledger.pub          # PEM public key (relative to the file) or a note
                                      # verifier key (name+keyid+base64, name = the origin)

A checkpoint whose origin is not listed is refused (404), one not signed by its log's key
(403), as C2SP tlog-witness requires.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attest.certificate.note_keys import NoteKey, parse_note_key
from attest.core.strict_yaml import load_yaml_mapping
from attest.core.validation import validation_problems
from attest.errors import ConfigError, KeyError_, LedgerError
from attest.ledger.checkpoint import check_origin, load_checkpoint_key

__all__ = ["KnownLog", "load_logs"]


class _Log(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    origin: str = Field(min_length=1, max_length=1000)
    key: str = Field(min_length=1, max_length=10_000)


class _LogsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    logs: list[_Log] = Field(max_length=10_000)


@dataclass(frozen=True)
class KnownLog:
    """A log the witness follows: its origin and the key its checkpoints are signed with."""

    origin: str
    key: NoteKey


def _key(text: str, origin: str, base: Path, where: str) -> NoteKey:
    if "+" in text and "\n" not in text.strip() and not (base / text).is_file():
        try:
            key = parse_note_key(text)
        except KeyError_ as exc:
            raise ConfigError(f"{where}.key: {exc.message}") from None
        if key.name != origin:
            raise ConfigError(
                f"{where}.key is named {key.name!r}, not the log's origin {origin!r}",
                hint="a log's note key is named after its origin (tlog-checkpoint)",
            )
        return key
    path = Path(text) if Path(text).is_absolute() else base / text
    public, name = load_checkpoint_key(path)
    if name is not None and name != origin:
        raise ConfigError(f"{where}.key ({path}) is named {name!r}, not {origin!r}")
    return NoteKey(origin, public)


def load_logs(path: str | Path) -> dict[str, KnownLog]:
    """Read ``logs.yaml`` strictly; the logs by origin (an origin listed twice is refused)."""
    p = Path(path)
    raw = load_yaml_mapping(p, what="logs file")
    try:
        parsed = _LogsFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"logs file {p}: {validation_problems(exc)}") from None
    logs: dict[str, KnownLog] = {}
    for number, entry in enumerate(parsed.logs):
        where = f"logs file {p}: logs[{number}]"
        try:
            origin = check_origin(entry.origin)
        except LedgerError as exc:
            raise ConfigError(f"{where}.origin: {exc.message}", hint=exc.hint) from None
        if origin in logs:
            raise ConfigError(f"{where}: origin {origin!r} is listed twice")
        logs[origin] = KnownLog(origin, _key(entry.key, origin, p.parent, where))
    if not logs:
        raise ConfigError(f"logs file {p} lists no logs", hint="a witness needs a log to follow")
    return logs
