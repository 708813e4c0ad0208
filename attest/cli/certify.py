"""``attest certify`` (``attest evaluate`` is in :mod:`attest.cli.evaluate`).

Only click is imported at module level; the policy engine and (for certify) the torch-based
collect side are imported when a command runs. Exit codes: 0 pass, 1 policy failed,
2 bad input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from attest.cli.cosign import identity, signer_options
from attest.cli.evaluate import findings_summary, parse_at
from attest.cli.output import echo_json
from attest.cli.progress_option import heartbeat_seconds, progress_option
from attest.cli.remote_options import ledger_tiles_option, remote_ledger_options
from attest.cli.verify import is_url
from attest.errors import EXIT_NEGATIVE, InputError

if TYPE_CHECKING:  # pragma: no cover
    from attest.pipeline import CertifyResult


def _rewrite_as_bundle(path: Path) -> None:
    """The written certificate, in the Sigstore bundle form (atomically replaced)."""
    from attest.certificate.bundle import dropped_signer_blocks, to_bundle
    from attest.core.io import atomic_write_json, read_json_file

    envelope = read_json_file(path, what="certificate")
    atomic_write_json(path, to_bundle(envelope))
    if dropped_signer_blocks(envelope):
        click.echo(
            "note: the signer attestation (name, role, meaning, timestamp) is not carried by a "
            "Sigstore bundle; certify without --format for the Part 11 record",
            err=True,
        )


def _named_evidence(text: str) -> tuple[str, Path] | Path:
    """``--evidence [NAME=]FILE``: a target name is given when the part before ``=`` is not an
    existing file (so a file name holding ``=`` still works)."""
    name, sep, path = text.partition("=")
    if sep and name and not Path(text).exists():
        return (name, Path(path))
    return Path(text)


def _record_issued(
    ledger: str, remote: Any, certificate: Path, proof_out: Path | None = None
) -> None:
    """``certify --ledger``: an ``issued`` entry, in a local ledger or through the spool; with
    ``proof_out`` (a service only), its offline proof once recorded."""
    from attest.ledger import append_certificate
    from attest.ledger.entries import entry_for_certificate

    if remote is None:
        result = append_certificate(Path(ledger), certificate)
        click.echo(f"ledger: recorded as entry {result.index} of {ledger}", err=True)
        return
    from attest.cli.ledger_remote import submit_remote, write_ledger_proof

    index = submit_remote(remote, entry_for_certificate(certificate))
    if proof_out is not None:
        write_ledger_proof(remote.reads, certificate, index, proof_out)


@click.command("certify")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "--spec",
    "spec_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="With a MONAI bundle folder as SPEC: the attest.yaml giving the probe and target "
    "[default: attest.yaml beside the bundle].",
)
@click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Policy YAML, or a shipped policy by name: clinical-strict, research.",
)
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Private signing key (passphrase from ATTEST_KEY_PASSPHRASE or a prompt).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Certificate to write on pass [default: gradient_certificate.json; for a MONAI "
    "bundle, beside the bundle].",
)
@click.option(
    "--evidence-out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Evidence file [default: evidence.json next to the certificate].",
)
@click.option(
    "--findings-out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Findings file [default: findings.json next to the certificate].",
)
@click.option(
    "--report",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the HTML report here.",
)
@click.option(
    "--expires-in",
    default="365d",
    show_default=True,
    help="Certificate lifetime: 365d, 26w, 1y, 12h.",
)
@click.option(
    "--at",
    "at_text",
    default=None,
    help="Reference time for waiver expiry and issued_at (default: now).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (as --progress none).")
@progress_option
@click.option(
    "--budget",
    default=None,
    metavar="DURATION",
    help="Plan the collect to fit this time (e.g. 30m, 2h) from a calibration on the model, "
    "never below the policy's evidence floors: a budget they cannot meet is refused at the "
    "start, naming the smallest that can. The evidence says what was reduced. Default: the "
    "spec's budget:, else the full work.",
)
@click.option(
    "--training-log",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="run.jsonl of attest.TrainingMonitor: bound as a subject, its summary in the evidence "
    "and held against the policy's training_log: thresholds.",
)
@click.option(
    "--format",
    "cert_format",
    type=click.Choice(["dsse", "sigstore-bundle"]),
    default="dsse",
    show_default=True,
    help="The certificate's form: the DSSE envelope, or a Sigstore bundle v0.3 holding it "
    "(docs/interop.md; signer attestations are not carried by a bundle).",
)
@click.option(
    "--model-signing",
    is_flag=True,
    help="Also sign the spec's folder with OpenSSF model-signing (model.sig, bound as a "
    "subject); needs an ECDSA P-256 key.",
)
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    metavar="[NAME=]PATH",
    help="Also bind this file, or every file of this folder through one manifest (OpenSSF "
    "model-signing's format; attest verify --artifact FOLDER/ checks the whole folder). Repeat "
    "for several.",
)
@click.option(
    "--ignore",
    "ignore_paths",
    multiple=True,
    metavar="PATH",
    help="A path (relative to each --artifact folder, and to a certified MONAI bundle or Hugging "
    "Face folder) left out of its manifest; .git and the certificate's name always are. Repeat "
    "for several.",
)
@click.option(
    "--evidence",
    "evidence_files",
    multiple=True,
    metavar="[NAME=]FILE",
    help="Certify evidence collected elsewhere instead of collecting here: one file per "
    "hardware target (repeat the option); NAME names the target (default: the hardware "
    "target the evidence records).",
)
@click.option(
    "--trust",
    "trust_path",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --evidence: the trust store whose collector keys (role collector, or names the "
    "policy's evidence.collectors lists) must have signed each file's STEM.intoto.json; "
    "required by a policy with evidence.require_signed (clinical-strict).",
)
@click.option(
    "--ledger",
    default=None,
    metavar="PATH|URL",
    help="On pass, record the certificate as issued in this audit ledger: a local file, or a "
    "ledger service (https://...; with --ledger-client and --ledger-client-key; queued offline).",
)
@click.option(
    "--ledger-proof-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="With --ledger URL: once the issued entry is recorded, write its offline proof (C2SP"
    " tlog-proof: index, inclusion proof, the log's cosigned checkpoint) here, for attest verify"
    " --ledger-proof and attest archive on servers with no network.",
)
@remote_ledger_options
@ledger_tiles_option
@signer_options(default_meaning="authorship")
@click.pass_context
def certify(
    ctx: click.Context,
    spec: Path,
    spec_file: Path | None,
    policy_path: Path,
    key_path: Path,
    output: Path | None,
    evidence_out: Path | None,
    findings_out: Path | None,
    report: Path | None,
    expires_in: str,
    at_text: str | None,
    as_json: bool,
    quiet: bool,
    progress_mode: str,
    budget: str | None,
    training_log: Path | None,
    signer_name: str | None,
    signer_role: str,
    meaning: str,
    comment: str,
    tsa: str | None,
    cert_format: str,
    model_signing: bool,
    artifacts: tuple[str, ...],
    ignore_paths: tuple[str, ...],
    evidence_files: tuple[str, ...],
    trust_path: Path | None,
    ledger: str | None,
    ledger_proof_out: Path | None,
    ledger_client: str | None,
    ledger_client_key: Path | None,
    ledger_log_key: Path | None,
    ledger_tiles: str | None,
) -> None:
    """Collect evidence for SPEC (attest.yaml, or a MONAI bundle folder), evaluate it and, on
    pass, sign the certificate.

    A bundle's model comes from the bundle (configs/inference.json's network_def,
    models/model.pt, configs/metadata.json), its probe and target from --spec (default:
    attest.yaml beside it); every file of the bundle is bound through one manifest (one
    subject named as the folder; attest verify --artifact BUNDLE/ checks it whole), and
    nothing is written into it.

    On a failed policy no certificate is written; the evidence and findings are, and the
    failing rules are listed. Exit 0 pass, 1 policy failed, 2 bad input.

    With --evidence (once per hardware target), nothing is collected: each target's evidence
    is held against the policy and one certificate lists every target with its verdict; it
    is signed only if every required target (the policy's required_targets) passes. Each
    file's collector statement (STEM.intoto.json, attest collect --key) is checked against
    --trust; a policy with evidence.require_signed (clinical-strict) refuses unsigned files.
    The certificate records every target's evidence provenance.
    """
    from attest.certificate.signing import load_private_key
    from attest.cli.budget_report import say_overrun
    from attest.cli.ledger_remote import remote_ledger
    from attest.core.progress_display import terminal_progress
    from attest.pipeline import certify as run_certify
    from attest.pipeline.subjects import ExtraArtifacts

    started = time.perf_counter()  # a --budget counts from here: the user waits for the start too
    _refuse_mixes(
        spec, spec_file, evidence_files, budget, trust_path, training_log, ledger,
        ledger_proof_out, ledger_log_key,
    )  # fmt: skip
    if output is None:
        default = Path("gradient_certificate.json")
        output = spec.resolve().parent / default if spec.is_dir() else default
    extra = ExtraArtifacts.parse(artifacts, ignore_paths)
    if ignore_paths and evidence_files and not any(path.is_dir() for _, path in extra.items):
        raise InputError("--ignore leaves paths out of a folder; give the folder with --artifact")
    signer = identity(signer_name, signer_role, meaning, comment)
    signing_key = load_private_key(key_path)  # before the display: it may ask for a passphrase
    common: dict[str, Any] = {
        "policy": policy_path,
        "key": signing_key,
        "out": output,
        "evidence_out": evidence_out,
        "findings_out": findings_out,
        "report": report,
        "expires_in": expires_in,
        "at": parse_at(at_text),
        "signer": signer,
        "tsa": tsa,
        "model_signing": model_signing,
        "artifacts": extra,
    }
    remote = (
        remote_ledger(str(ledger), ledger_client, ledger_client_key, ledger_log_key, ledger_tiles)
        if is_url(ledger)
        else None
    )
    heartbeat_s = heartbeat_seconds()
    with terminal_progress(
        quiet=quiet, as_json=as_json, mode=progress_mode, heartbeat_s=heartbeat_s
    ) as progress:
        if evidence_files:
            from attest.pipeline.targets import certify_evidence

            items = [_named_evidence(text) for text in evidence_files]
            result = certify_evidence(spec, items, progress=progress, trust=trust_path, **common)
        else:
            result = run_certify(
                spec,
                progress=progress,
                budget=budget,
                training_log=training_log,
                spec_file=spec_file,
                started=started,
                **common,
            )
    say_overrun(result.evidence)
    if cert_format == "sigstore-bundle" and result.certificate_path is not None:
        _rewrite_as_bundle(result.certificate_path)
    if ledger is not None and result.certificate_path is not None:
        _record_issued(ledger, remote, result.certificate_path, ledger_proof_out)
    _print_result(result, output, as_json)
    if not result.passed:
        ctx.exit(EXIT_NEGATIVE)


def _refuse_mixes(
    spec: Path,
    spec_file: Path | None,
    evidence_files: tuple[str, ...],
    budget: str | None,
    trust_path: Path | None,
    training_log: Path | None,
    ledger: str | None,
    ledger_proof_out: Path | None,
    ledger_log_key: Path | None,
) -> None:
    """Options that cannot go together, refused before any key is loaded or work is done."""
    if evidence_files and budget is not None:
        raise InputError("--budget applies to collecting; it cannot go with --evidence")
    if evidence_files and (spec_file is not None or spec.is_dir()):
        raise InputError(
            "--evidence certifies evidence of an attest.yaml collected elsewhere; a MONAI "
            "bundle is certified where it is collected",
            hint="attest certify BUNDLE/ --policy ... --key ...",
        )
    if trust_path is not None and not evidence_files:
        raise InputError(
            "--trust checks the collectors of evidence given with --evidence; certify "
            "collecting here needs none",
            hint="drop --trust, or certify collected files with --evidence FILE --trust TRUST",
        )
    if evidence_files and training_log is not None:
        raise InputError(
            "--training-log binds a log when certify collects; it cannot go with --evidence",
            hint="collect with the log bound, or certify the log's model without --evidence",
        )
    if ledger_proof_out is not None and not is_url(ledger):
        raise InputError(
            "--ledger-proof-out needs --ledger URL (a ledger service)",
            hint="for a local ledger: sign a checkpoint (attest ledger checkpoint), then"
            " attest ledger proof CERT --ledger PATH -o FILE",
        )
    if ledger_proof_out is not None and ledger_log_key is None:
        raise InputError(
            "--ledger-proof-out needs --ledger-log-key LEDGER.pub",
            hint="the write is proven under the log's key before its offline proof is fetched",
        )


def _print_provenance(result: CertifyResult) -> None:
    """Each target's evidence provenance as the certificate records it, one line each."""
    from attest.verification.outcome import provenance_line

    recorded = result.statement.predicate.evidence_provenance if result.statement else {}
    for target, record in recorded.items():
        click.echo(f"  evidence {provenance_line(target, record.model_dump(mode='json'))}")


def _print_result(result: CertifyResult, output: Path, as_json: bool) -> None:
    """The verdict, the findings and where each output is (text, or one JSON object)."""
    outputs = {
        "certificate": str(result.certificate_path) if result.certificate_path else None,
        "evidence": str(result.evidence_path),
        "findings": str(result.findings_path),
        "report": str(result.report_path) if result.report_path else None,
    }
    if as_json:
        statement = result.statement
        echo_json(
            {
                "verdict": result.verdict,
                "counts": result.findings.counts,
                "policy": result.findings.policy.model_dump(mode="json"),
                "certificate_id": statement.predicate.certificate_id if statement else None,
                "outputs": outputs,
                "failed": [f.model_dump(mode="json") for f in result.findings.failed],
                "targets": [t.model_dump(mode="json") for t in result.findings.targets],
            }
        )
    else:
        for line in findings_summary(result.findings):
            click.echo(line)
        failure = result.evidence.model_failure
        if failure is not None:
            click.echo(
                f"the model raised during {failure.phase}: {failure.error_type}: {failure.message}"
                + (f" (module {failure.module})" if failure.module else "")
            )
        if result.passed:
            click.echo(f"certificate: {result.certificate_path}")
            _print_provenance(result)
        else:
            click.echo("no certificate written: the policy failed")
            if output.exists():
                click.echo(f"note: {output} is an older certificate; it does not cover this run")
        for target in result.findings.targets:
            needed = "required" if target.required else "not required"
            click.echo(f"target {target.name}: {target.verdict.upper()} ({needed})")
        click.echo(f"evidence:    {result.evidence_path}")
        click.echo(f"findings:    {result.findings_path}")
        if result.report_path:
            click.echo(f"report:      {result.report_path}")
