"""The log's side of C2SP tlog-witness: ``witnesses.yaml`` (which witnesses a log asks, how many
cosignatures it waits for) and an asynchronous client (aiohttp) asking one witness to cosign.

``witnesses.yaml`` (``attest ledger serve --witnesses``)::

    witnesses:
      - name: w1                                  # a label for logs and metrics
        url: https://witness.example.org/         # its submission prefix
        key: witness.example.org/w1+30d819de+BD4m...   # its cosigner vkey (attest ledger witness key)
    quorum: 2        # cosignatures a checkpoint needs before it is published
    wait: 5          # seconds a write waits for its checkpoint to be cosigned (then answered
                     # with the log's own signature only)

The client remembers the size each witness last cosigned. It does not know it at first, so it
sends ``old 0`` and, on the 409 that carries the witness's size, sends the consistency proof
from that size (tlog-witness: "a client MAY initially make a request with a old size of
zero"). Every cosignature line returned is verified under the configured key before it is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, NoteKey, parse_note_key
from attest.core.strict_yaml import load_yaml_mapping
from attest.core.validation import validation_problems
from attest.errors import ConfigError, KeyError_
from attest.ledger.checkpoint import Checkpoint
from attest.ledger.witness.core import SIZE_CONTENT_TYPE, add_checkpoint_body
from attest.ledger.witness.cosignature import check_cosignatures, merge_signatures

__all__ = [
    "WitnessClient",
    "WitnessEndpoint",
    "WitnessingConfig",
    "load_witnessing",
    "witness_session",
]

LOG = logging.getLogger("attest.ledger.service.witnessing")
Prove = Callable[[int, int], Awaitable[list[bytes]]]


class _Witness(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    url: str = Field(pattern=r"^https?://", max_length=2000)
    key: str = Field(min_length=1, max_length=2000)


class _WitnessesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    witnesses: list[_Witness] = Field(min_length=1, max_length=100)
    quorum: int = Field(ge=1)
    wait: float = Field(default=5.0, ge=0, le=600)


@dataclass(frozen=True)
class WitnessEndpoint:
    """One witness the log asks: its label, submission prefix and cosigner key."""

    name: str
    url: str
    key: NoteKey


@dataclass(frozen=True)
class WitnessingConfig:
    """The witnesses, the quorum a checkpoint needs before it is published, and how long a
    write waits for it (seconds)."""

    witnesses: tuple[WitnessEndpoint, ...]
    quorum: int
    wait_s: float = 5.0


def load_witnessing(path: str | Path) -> WitnessingConfig:
    """Read ``witnesses.yaml`` strictly."""
    p = Path(path)
    raw = load_yaml_mapping(p, what="witnesses file")
    try:
        parsed = _WitnessesFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"witnesses file {p}: {validation_problems(exc)}") from None
    found: list[WitnessEndpoint] = []
    for number, entry in enumerate(parsed.witnesses):
        where = f"witnesses file {p}: witnesses[{number}]"
        try:
            key = parse_note_key(entry.key, SIGNATURE_TYPE_COSIGNATURE)
        except KeyError_ as exc:
            raise ConfigError(f"{where}.key: {exc.message}") from None
        if any(w.name == entry.name or w.key.public_key == key.public_key for w in found):
            raise ConfigError(f"{where}: witness {entry.name!r} (or its key) is listed twice")
        found.append(WitnessEndpoint(entry.name, entry.url.rstrip("/") + "/", key))
    if parsed.quorum > len(found):
        raise ConfigError(
            f"witnesses file {p}: quorum {parsed.quorum} can never be met with {len(found)}"
            " witness(es)"
        )
    return WitnessingConfig(tuple(found), parsed.quorum, parsed.wait)


class WitnessClient:
    """Asks one witness to cosign checkpoints of one log, remembering its size."""

    def __init__(self, endpoint: WitnessEndpoint, http: aiohttp.ClientSession) -> None:
        self.endpoint, self.http = endpoint, http
        self.size: int | None = None  # the size it last cosigned, once known

    async def cosign(self, note: str, checkpoint: Checkpoint, prove: Prove) -> str | None:
        """The witness's verified cosignature lines over ``note``, or None (refused,
        unreachable, or a cosignature that does not verify: each logged)."""
        name = self.endpoint.name
        old = self.size or 0
        for _ in range(2):  # at most: the first try, then once with the size a 409 gave
            if old > checkpoint.size:
                LOG.error(
                    "witness %s cosigned size %d, above this log's checkpoint of %d: the log"
                    " lost entries it had shown the witness",
                    name, old, checkpoint.size,
                )  # fmt: skip
                return None
            proof = await prove(old, checkpoint.size) if 0 < old < checkpoint.size else []
            try:
                status, kind, text = await self._post(add_checkpoint_body(old, proof, note))
            except (aiohttp.ClientError, TimeoutError) as exc:
                LOG.warning("witness %s did not answer: %s", name, type(exc).__name__)
                return None
            if status == 409 and kind == SIZE_CONTENT_TYPE:
                text = text.strip()
                if not text.isdigit() or len(text) > 20:
                    LOG.warning("witness %s answered 409 without a size", name)
                    return None
                old = self.size = int(text)
                continue
            if status != 200:
                LOG.warning(
                    "witness %s refused the checkpoint of size %d: HTTP %d %s",
                    name, checkpoint.size, status, text[:300].strip(),
                )  # fmt: skip
                return None
            lines = "".join(
                line + "\n"
                for line in text.split("\n")
                if line.startswith(f"\u2014 {self.endpoint.key.name} ")
            )
            merged = merge_signatures(note, lines)
            if name not in check_cosignatures(merged, [(name, self.endpoint.key)]).verified:
                LOG.warning("witness %s answered without a valid cosignature", name)
                return None
            self.size = checkpoint.size
            return lines
        return None

    async def _post(self, body: bytes) -> tuple[int, str, str]:
        """POST ``add-checkpoint``: the answer's status, media type and text. aiohttp, not
        httpx: a round sends one of these to every witness, and httpx's client cost about
        800 us of CPU per request against aiohttp's 100 us, measured on the service's machine
        (docs/benchmarks.md, ledger service: "CPU per write and the witness round")."""
        async with self.http.post(
            self.endpoint.url + "add-checkpoint",
            data=body,
            headers={"Content-Type": "text/plain; charset=utf-8"},
        ) as answer:
            raw = await answer.read()
            kind = answer.headers.get("content-type", "").split(";")[0].strip()
            return answer.status, kind, raw.decode("utf-8", errors="replace")


def witness_session() -> aiohttp.ClientSession:
    """The HTTP session a log's witness clients share (kept-alive connections, 10 s per
    request); open it inside the running event loop, close it with ``await .close()``."""
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0))
