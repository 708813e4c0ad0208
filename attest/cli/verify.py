"""``attest verify`` and ``attest inspect``.

Imports only click at module level, so ``attest verify --help`` starts fast; the verifier
itself (:mod:`attest.verification.verifier`, torch- and numpy-free) is imported when the command runs.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from attest.cli.remote_options import ledger_tiles_option, remote_ledger_options
from attest.core.text import json_safe, printable_json, safe_text
from attest.errors import EXIT_NEGATIVE, AttestError, InputError


def _skew(text: str) -> timedelta:
    from attest.core.times import parse_duration

    return parse_duration(
        text,
        option="--clock-skew",
        default_unit="s",
        maximum=timedelta(days=1),  # attest.verification.verifier.MAX_CLOCK_SKEW
        example="e.g. 60s, 5m, 1h (at most a day: a larger skew accepts certificates far "
        "outside their validity window)",
    )


def _at(text: str | None) -> datetime | None:
    from attest.core.times import parse_moment

    return None if text is None else parse_moment(text, option="--at")


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


def _revocations(files: tuple[Path, ...], ledger: str | None) -> list[tuple[str, bytes]]:
    """The revocation statements to honour: the files given and those a local ledger holds (a
    ledger service's revocations are not read here: pass them with --revocations)."""
    from attest.core.files import read_bytes_checked
    from attest.core.io import MAX_JSON_BYTES

    found = [
        (safe_text(path), read_bytes_checked(path, what="revocation", max_bytes=MAX_JSON_BYTES))
        for path in files
    ]
    local = Path(ledger) if ledger is not None and not is_url(ledger) else None
    if local is not None and local.exists():
        from attest.ledger import revocations_in

        found += revocations_in(local)
    return found


def is_url(target: str | None) -> bool:
    """True when a --ledger value names a ledger service rather than a local file (here, not in
    attest.cli.ledger_remote, so that a plain ``attest verify`` does not import the client)."""
    return target is not None and target.startswith(("http://", "https://"))


def _recorder(ledger: str | None, target: Any) -> Any:
    """``record(report_dict)`` for ``--ledger`` (a file, or a service URL whose checked options
    are ``target``), or None; looked up before verifying, so a usage error never follows a
    verdict."""
    if ledger is None:
        return None
    from attest.cli.ledger_remote import submit_remote

    if target is not None:

        def submit(report: dict[str, Any]) -> None:
            from attest.ledger.entries import entry_for_verification

            submit_remote(target, entry_for_verification(report))

        return submit
    path = Path(ledger)
    record = _ledger_recorder(path)
    return lambda report: record(path, report)


def _remote_outcome(report: Any, unknown: tuple[str, str] | None, note: str | None) -> None:
    """Fail closed when the ledger service's revocations could not be read from a log that
    verifies: the certificate is rejected with REVOCATION_STATUS_UNKNOWN."""
    if note is not None:
        report.notes.append(note)
    if unknown is not None:
        report.reasons.append(unknown)
        report.verified = False
        report.statement = None


def _render(data: dict[str, Any]) -> str:
    """The text report; every field is made safe to print (it may hold unsigned text)."""
    model = data.get("model") or {}
    cert = data["certificate"]
    lines = []
    if data["verified"]:
        lines.append(
            f"VERIFIED: {safe_text(model.get('name'), 200)} {safe_text(model.get('version'), 64)}"
            f" (certificate {safe_text(cert['id'], 200)})"
        )
    else:
        lines.append(f"REJECTED: {safe_text(cert['path'])}")
        lines += [
            f"  {safe_text(r['code'], 64)}: {safe_text(r['message'], 2000)}"
            for r in data["reasons"]
        ]
    lines += _policy_lines(data)
    if data["verified"] and data.get("evidence_provenance") is not None:
        from attest.verification.outcome import provenance_lines

        lines += [f"  evidence {line}" for line in provenance_lines(data["evidence_provenance"])]
    from attest.verification.signatures import signature_line

    lines += [f"  {signature_line(sig)}" for sig in data.get("signatures") or []]
    if data["subjects_checked"]:
        names = ", ".join(safe_text(n, 300) for n in data["subjects_checked"])
        lines.append(f"  subjects checked: {names}")
    for folder, files in sorted((data.get("folder_files") or {}).items()):
        lines.append(f"  folder {safe_text(folder, 300)}: {len(files)} files checked")
    if data["subjects_not_checked"]:
        names = ", ".join(safe_text(n, 300) for n in data["subjects_not_checked"])
        lines.append(f"  subjects not given: {names}")
    lines.append(f"  checked at: {data['checked_at']}")
    if data.get("probe"):
        probe = data["probe"]
        lines.append(
            f"  probe ({safe_text(probe.get('mode'), 32)}): {safe_text(probe.get('message'), 2000)}"
        )
    if data.get("environment_target"):
        lines.append(f"  environment: matches target {safe_text(data['environment_target'], 200)}")
    lines += [f"  note: {safe_text(note, 2000)}" for note in data["notes"]]
    return "\n".join(lines)


def _policy_lines(data: dict[str, Any]) -> list[str]:
    """The policy the certificate records (id, version, digest) and its findings by verdict."""
    policy = data.get("policy")
    if not isinstance(policy, dict):
        return []
    digest = (policy.get("digest") or {}).get("sha256")
    lines = [
        f"  policy: {safe_text(policy.get('id'), 200)} version "
        f"{safe_text(policy.get('version'), 64)} (sha256 {safe_text(digest, 64)})"
    ]
    counts = data.get("verdict_counts") or {}
    if counts:
        shown = ", ".join(f"{n} {safe_text(v, 32)}" for v, n in counts.items() if n)
        lines.append(f"  findings: {shown or 'none recorded'}")
    return lines


def _failure_entry(certificate: Path, exc: BaseException) -> dict[str, Any]:
    """What the ledger records when verification could not reach a verdict (exit 2 or 3)."""
    import hashlib

    code = "INPUT_ERROR" if isinstance(exc, AttestError) else "INTERNAL_ERROR"
    message = exc.message if isinstance(exc, AttestError) else f"{type(exc).__name__}: {exc}"
    digest = None
    with contextlib.suppress(OSError, ValueError), certificate.open("rb") as fh:
        digest = hashlib.sha256(fh.read(16 * 1024 * 1024 + 1)).hexdigest()
    return {
        "verified": False,
        "reasons": [{"code": code, "message": safe_text(message, 2000)}],
        "certificate": {"path": safe_text(certificate), "sha256": digest},
        "certificate_checked": False,
    }


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
    metavar="PATH|URL",
    help="Append the outcome to this audit ledger, a local file or a ledger service "
    "(https://...; with --ledger-client and --ledger-client-key; queued offline); a local "
    "ledger's revocations also reject a certificate it records as revoked.",
)
@click.option(
    "--revocations",
    "revocation_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A signed revocation statement (attest revoke -o FILE) to honour (repeatable).",
)
@click.option(
    "--require-policy",
    "required_policies",
    multiple=True,
    metavar="ID[@>=VERSION]",
    help="Accept only certificates under this policy (repeatable: any one of them), e.g. "
    "clinical-strict@>=1; else POLICY_NOT_ACCEPTED. A policy that extends it must be named.",
)
@remote_ledger_options
@ledger_tiles_option
@click.option(
    "--ledger-proof",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="An offline proof (C2SP tlog-proof, attest ledger proof) that the certificate was"
    " recorded: checked with no network against the trust store's ledger key and witness"
    " quorum; else LEDGER_PROOF_INVALID or WITNESS_QUORUM_NOT_MET.",
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
    ledger: str | None,
    revocation_files: tuple[Path, ...],
    required_policies: tuple[str, ...],
    ledger_client: str | None,
    ledger_client_key: Path | None,
    ledger_log_key: Path | None,
    ledger_tiles: str | None,
    ledger_proof: Path | None,
    as_json: bool,
) -> None:
    """Verify a certificate offline against a trust store and the artifacts at hand.

    Exit codes: 0 verified, 1 rejected (with reason codes), 2 usage or unreadable input.
    """
    from attest.verification.policy_accept import parse_accepted_policy
    from attest.verification.verifier import record_rollback
    from attest.verification.verifier import verify as run_verify

    accepted = [parse_accepted_policy(p, "--require-policy") for p in required_policies]

    remote = None
    if is_url(ledger):
        from attest.cli.ledger_remote import remote_ledger, remote_revocations

        remote = remote_ledger(
            str(ledger), ledger_client, ledger_client_key, ledger_log_key, ledger_tiles
        )
    record = _recorder(ledger, remote)
    revocations = _revocations(revocation_files, ledger)
    unknown: tuple[str, str] | None = None  # the remote log's revocations could not be read
    remote_note: str | None = None
    if remote is not None and remote.log_key is not None:
        from attest.cli.ledger_remote import witness_policy

        found, unknown, remote_note = remote_revocations(remote, witness_policy(trust_path))
        revocations += found
    elif remote is not None:  # submission only: the log's revocations need its key
        remote_note = (
            "revocations held by the ledger service were not read (give --ledger-log-key to"
            " read them from a log that verifies; a certificate is then rejected when they"
            " cannot be read)"
        )
    if no_state:
        state_file = None
    elif state_file is None:
        state_file = _default_state_file()
    # Order of effects: verify, render, then record (rollback state, ledger entry), then
    # print. Nothing is recorded for a verdict that could not be rendered; a verification
    # that could not reach a verdict is recorded in the ledger as a rejection all the same.
    try:
        report = run_verify(
            certificate,
            trust=trust_path,
            artifacts=list(artifacts),
            at=_at(at_text),
            clock_skew=_skew(clock_skew),
            state_file=state_file,
            probe=probe,
            check_environment=check_environment,
            record_state=False,
            revocations=revocations,
            accepted_policies=accepted,
        )
        if remote is not None:
            _remote_outcome(report, unknown, remote_note)
        if ledger_proof is not None:
            from attest.cli.ledger_remote import offline_proof_outcome

            offline_proof_outcome(report, ledger_proof, trust_path, certificate)
        data = json_safe(report.to_dict())
        text = printable_json(data) if as_json else _render(data)
        if state_file is not None and at_text is None:
            record_rollback(report, state_file)
    except Exception as exc:
        if record is not None:
            with contextlib.suppress(Exception):  # the original error is the one to show
                record(_failure_entry(certificate, exc))
        raise
    if record is not None:
        record(data)
    click.echo(text)
    if not report.verified:
        ctx.exit(EXIT_NEGATIVE)


@click.command("inspect")
@click.argument("certificate", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the statement as JSON.")
def inspect(certificate: Path, as_json: bool) -> None:
    """Print what a certificate says, WITHOUT verifying it."""
    from attest.verification.envelope import Rejected, parse_envelope, read_certificate

    shown = safe_text(certificate)
    try:
        envelope = parse_envelope(read_certificate(certificate))
        from attest.core.io import loads_strict

        statement = loads_strict(envelope.payload)
    except Rejected as exc:
        raise InputError(f"certificate {shown} cannot be read: {safe_text(exc.message)}") from None
    except ValueError as exc:
        raise InputError(f"certificate {shown}: the payload is not JSON: {exc}") from None
    if as_json:
        data = {
            "verified": False,
            "note": "NOT VERIFIED: run attest verify",
            "statement": statement,
        }
        click.echo(printable_json(json_safe(data)))
        return
    click.echo(_render_claims(statement, [_claimed(s) for s in envelope.signatures]))


def _field(data: object, *keys: str) -> Any:
    """``data[k1][k2]...`` where each level is a mapping, else None (unsigned input may have
    any shape)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _claimed(signature: Any) -> dict[str, Any]:
    """What one signature's signer block claims, NOT verified (for inspect)."""
    from attest.core.io import StrictJSONError, loads_strict

    data: Any = {}
    if signature.signer is not None:
        with contextlib.suppress(StrictJSONError):
            data = loads_strict(signature.signer.attestation)
    data = data if isinstance(data, dict) else {}
    stamped = signature.signer is not None and signature.signer.timestamp is not None
    return {
        "index": None,
        "keyid": signature.hint,
        "key_name": None,  # the key id is only a hint until verified
        "name": data.get("name") if data else None,
        "role": data.get("role"),
        "meaning": data.get("meaning"),
        "signed_at": data.get("signed_at"),
        "comment": data.get("comment"),
        "timestamp": "(token present)" if stamped else None,
        "status": "NOT VERIFIED",
    }


def _render_claims(statement: Any, claims: list[dict[str, Any]]) -> str:
    """What an unverified certificate claims, every value made safe to print: a claim must
    never be able to overwrite the NOT VERIFIED line above it."""

    def show(*keys: str, limit: int = 200) -> str:
        return safe_text(_field(statement, "predicate", *keys), limit)

    lines = ["NOT VERIFIED: this is what the certificate claims; `attest verify` checks it."]
    if not isinstance(_field(statement, "predicate"), dict):
        lines.append(printable_json(json_safe(statement)))
        return "\n".join(lines)
    lines += [
        f"  model:       {show('model', 'name')} {show('model', 'version', limit=64)}",
        f"  certificate: {show('certificate_id')}",
        f"  verdict:     {show('verdict', limit=32)}",
        f"  policy:      {show('policy', 'id')} {show('policy', 'version', limit=64)}",
        f"  issued:      {show('issued_at', limit=40)}  expires: {show('expires_at', limit=40)}",
    ]
    from attest.verification.signatures import signature_line

    for index, claim in enumerate(claims):
        lines.append(f"  {signature_line({**claim, 'index': index})}")
    subjects = _field(statement, "subject")
    for subject in subjects if isinstance(subjects, list) else []:
        if isinstance(subject, dict):
            digest = safe_text(_field(subject, "digest", "sha256") or "?", 80)
            lines.append(f"  subject:     {safe_text(subject.get('name'), 300)}  sha256:{digest}")
    findings = _field(statement, "predicate", "findings")
    if isinstance(findings, list) and findings:
        lines.append(f"  findings:    {len(findings)}")
    from attest.verification.outcome import provenance_lines

    provenance = _field(statement, "predicate", "evidence_provenance")
    lines += [f"  evidence:    {line}" for line in provenance_lines(provenance)]
    return "\n".join(lines)


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
