"""The policy's ``evidence:`` block: which evidence ``attest certify --evidence`` accepts.

::

    evidence:
      require_signed: true          # every --evidence file needs its collector's signed statement
      collectors: [collector]       # trust store roles or key names whose signatures count
      max_age: 30d                  # the statement's finished_at no older than this at certify
      min_attest_version: "0.1.0"   # the collector's attest version at least this

What certify checks with it: :mod:`attest.pipeline.provenance`; docs/policy-reference.md.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator

from attest.certificate.format import parse_version
from attest.core.times import parse_duration
from attest.errors import InputError

__all__ = ["EvidenceRules"]


class EvidenceRules(BaseModel):
    """What a policy requires of evidence collected elsewhere (``certify --evidence``)."""

    model_config = ConfigDict(extra="forbid")

    require_signed: bool = Field(
        default=False,
        description="every --evidence file must carry a statement signed by a trusted collector",
    )
    collectors: list[str] = Field(
        default_factory=lambda: ["collector"],
        description="trust store roles or key names whose signature on a statement counts",
    )
    max_age: str | None = Field(
        default=None,
        description="the oldest evidence accepted: its statement's finished_at no further back "
        "than this at certify time (e.g. 30d)",
    )
    min_attest_version: str | None = Field(
        default=None,
        description="the oldest attest version whose collect is accepted (e.g. 0.1.0)",
    )

    @field_validator("collectors")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        cleaned = [v.strip() for v in value]
        if not cleaned or any(not v for v in cleaned):
            raise ValueError("name at least one collector role or key name, none empty")
        return cleaned

    @field_validator("max_age")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_duration(value, option="evidence.max_age", minimum=timedelta(seconds=1))
            except InputError as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("min_attest_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None:
            parse_version(value)  # ValueError: not a release version
        return value

    @property
    def max_age_delta(self) -> timedelta | None:
        if self.max_age is None:
            return None
        return parse_duration(self.max_age, option="evidence.max_age")
