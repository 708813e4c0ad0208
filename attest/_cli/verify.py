"""``attest verify`` and ``attest inspect``.

Imports only click at module level, so ``attest verify --help`` starts fast; the verifier
itself (:mod:`attest.verify`, torch- and numpy-free) is imported when the command runs.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from attest.errors import EXIT_NEGATIVE, InputError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h)?")


def _skew(text: str) -> timedelta:
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise InputError(f"--clock-skew {text!r} is not a duration", hint="e.g. 60s, 5m, 1h")
    unit = {"s": 1, "m": 60, "h": 3600}[match.group(2) or "s"]
    return timedelta(seconds=float(match.group(1)) * unit)


def _at(text: str | None) -> datetime | None:
    from attest._certificate_format import parse_timestamp

    if text is None:
        return None
    try:
        return parse_timestamp(text)
    except ValueError as exc:
        raise InputError(
            f"--at {text!r} is not a timestamp: {exc}", hint="e.g. 2026-06-30T12:00:00Z"
        ) from None


def _ledger_recorder(path: Path | None) -> Any:
    """The ledger's ``record_verification``, looked up before verifying so a missing ledger
    fails as a usage error and never after a verdict was reached."""
    if path is None:
        return None
    import importlib

    try:
        module = importlib.import_module("attest.ledger")
    except ModuleNotFoundError:
        module = None
    record = getattr(module, "record_verification", None)
    if record is None:
        raise InputError(
            "--ledger: this installation has no audit ledger (attest.ledger.record_verification)",
            hint="run without --ledger, or upgrade gradient-attest",
        )
    return record


def _print_report(data: dict[str, Any]) -> None:
    model = data.get("model") or {}
    cert = data["certificate"]
    if data["verified"]:
        click.echo(
            f"VERIFIED: {model.get('name')} {model.get('version')} (certificate {cert['id']})"
        )
    else:
        click.echo(f"REJECTED: {cert['path']}")
        for reason in data["reasons"]:
            click.echo(f"  {reason['code']}: {reason['message']}")
    for signer in data["signers"]:
        click.echo(f"  signed by: {signer['name']} ({signer['keyid'][:16]})")
    if data["subjects_checked"]:
        click.echo(f"  subjects checked: {', '.join(data['subjects_checked'])}")
    if data["subjects_not_checked"]:
        click.echo(f"  subjects not given: {', '.join(data['subjects_not_checked'])}")
    click.echo(f"  checked at: {data['checked_at']}")
    if data.get("probe"):
        click.echo(f"  probe ({data['probe']['mode']}): {data['probe']['message']}")
    for note in data["notes"]:
        click.echo(f"  note: {note}")


@click.command("verify")
@click.argument("certificate", type=click.Path(path_type=Path))
@click.option(
    "--trust",
    "trust_path",
    required=True,
    envvar="ATTEST_TRUST",
    type=click.Path(path_type=Path),
    help="Trust store file (env ATTEST_TRUST).",
)
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    required=True,
    metavar="[NAME=]PATH",
    help="A file or directory to check against the certificate's subjects (repeatable). "
    "Named by its file name unless NAME= is given.",
)
@click.option(
    "--at", "at_text", default=None, help="Verify as of this time (RFC 3339), for audits."
)
@click.option("--clock-skew", default="60s", show_default=True, help="Tolerated clock difference.")
@click.option(
    "--state-file",
    default=None,
    envvar="ATTEST_STATE_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rollback state: highest version verified per model (env ATTEST_STATE_FILE; "
    "default: verify-state.json in the user's state directory).",
)
@click.option(
    "--no-state",
    is_flag=True,
    help="Do not read or update the rollback state (rollback is then not checked).",
)
@click.option(
    "--probe",
    default=None,
    metavar="[NAME=]PATH",
    help="Probe bundle (a subject): run the certified ONNX artifact on it and compare.",
)
@click.option(
    "--check-environment",
    is_flag=True,
    help="Compare this machine's runtime with the certified deployment envelope.",
)
@click.option(
    "--ledger",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the outcome to this audit ledger.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def verify(
    ctx: click.Context,
    certificate: Path,
    trust_path: Path,
    artifacts: tuple[str, ...],
    at_text: str | None,
    clock_skew: str,
    state_file: Path | None,
    no_state: bool,
    probe: str | None,
    check_environment: bool,
    ledger: Path | None,
    as_json: bool,
) -> None:
    """Verify a certificate offline against a trust store and the artifacts at hand.

    Exit codes: 0 verified, 1 rejected (with reason codes), 2 usage or unreadable input.
    """
    from attest.verify import verify as run_verify

    record = _ledger_recorder(ledger)
    if no_state:
        state_file = None
    elif state_file is None:
        state_file = _default_state_file()
    report = run_verify(
        certificate,
        trust=trust_path,
        artifacts=list(artifacts),
        at=_at(at_text),
        clock_skew=_skew(clock_skew),
        state_file=state_file,
        probe=probe,
        check_environment=check_environment,
    )
    data = report.to_dict()
    if record is not None:
        record(ledger, data)
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        _print_report(data)
    if not report.verified:
        ctx.exit(EXIT_NEGATIVE)


@click.command("inspect")
@click.argument("certificate", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the statement as JSON.")
def inspect(certificate: Path, as_json: bool) -> None:
    """Print what a certificate says, WITHOUT verifying it."""
    from attest._envelope import Rejected, parse_envelope, read_certificate

    try:
        envelope = parse_envelope(read_certificate(certificate))
        from attest._io import loads_strict

        statement = loads_strict(envelope.payload)
    except Rejected as exc:
        raise InputError(f"certificate {certificate} cannot be read: {exc.message}") from None
    except ValueError as exc:
        raise InputError(f"certificate {certificate}: the payload is not JSON: {exc}") from None
    if as_json:
        data = {
            "verified": False,
            "note": "NOT VERIFIED: run attest verify",
            "statement": statement,
        }
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    click.echo("NOT VERIFIED: this is what the certificate claims; `attest verify` checks it.")
    predicate = statement.get("predicate") if isinstance(statement, dict) else None
    if not isinstance(predicate, dict):
        click.echo(json.dumps(statement, indent=2, ensure_ascii=False))
        return
    model = predicate.get("model") or {}
    policy = predicate.get("policy") or {}
    click.echo(f"  model:       {model.get('name')} {model.get('version')}")
    click.echo(f"  certificate: {predicate.get('certificate_id')}")
    click.echo(f"  verdict:     {predicate.get('verdict')}")
    click.echo(f"  policy:      {policy.get('id')} {policy.get('version')}")
    click.echo(
        f"  issued:      {predicate.get('issued_at')}  expires: {predicate.get('expires_at')}"
    )
    click.echo(
        f"  signatures:  {', '.join(h[:16] or '(no key id)' for h, _ in envelope.signatures)}"
    )
    for subject in statement.get("subject") or []:
        if isinstance(subject, dict):
            digest = (subject.get("digest") or {}).get("sha256", "?")
            click.echo(f"  subject:     {subject.get('name')}  sha256:{digest}")
    findings = predicate.get("findings") or []
    if isinstance(findings, list) and findings:
        click.echo(f"  findings:    {len(findings)}")


def _default_state_file() -> Path | None:
    """``verify-state.json`` in the user's state directory (``$XDG_STATE_HOME``, else
    ``~/.local/state``), so rollback is checked unless asked not to; None (rollback then
    not checked, and the report says so) where that directory cannot be created."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    folder = Path(base) / "gradient-attest"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / "verify-state.json"
