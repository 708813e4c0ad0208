"""The HTML report: one self-contained file for auditors, safety officers and reviewers.

Sections, in order: the verdict and what was verified by signature; the summary (model,
digests, policy, signer, validity window, environment and determinism envelope); findings,
failures and waivers first, each linked to its operator or module row; the per-operator
charts, table and module roll-up; integrated gradients (heat maps beside the inputs, the
randomization curve); the gradient checks with their scope; the training checks (an overview,
then each check; recompute's regions with the memory each saves per second of recompute);
every other check.

A section whose data the input lacks says "not available in this evidence"; nothing here
raises on a missing field. Charts come from :mod:`attest.report.plots` (matplotlib, inline SVG).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest._version import __version__
from attest.core.io import atomic_write_text, sha256_file
from attest.errors import InputError
from attest.evidence.model import IG_CHECKS, TRAINING_CHECKS
from attest.report._page import (
    NA,
    Cell,
    badge,
    esc,
    flatten,
    fmt_number,
    kv,
    kv_columns,
    na,
    page,
    table,
)
from attest.report._rows import Anchors, flagged_operator_ids, module_rows
from attest.report._sections import (
    GRADIENT_CHECKS,
    PASSING,
    checks_section,
    findings_section,
    gradient_checks_section,
    ig_section,
    operators_section,
    other_checks_section,
)
from attest.report._source import (
    ReportSource,
    Verification,
    attach_evidence,
    evidence_bound,
    load_findings,
    load_source,
    verify_source,
)
from attest.report._training import training_section
from attest.report.training_log import training_section_of

__all__ = ["ReportResult", "render_report", "write_report"]


@dataclass
class ReportResult:
    """What :func:`write_report` wrote and concluded."""

    path: Path
    certified: bool  # a pass certificate, verified or (without --trust) as claimed
    verification: Verification
    operators: int


def _certified(src: ReportSource) -> bool:
    return src.kind == "certificate" and str(src.verdict).lower() in PASSING


def _banners(src: ReportSource, ver: Verification) -> str:
    verdict = str(src.verdict) if src.verdict is not None else None
    codes = ", ".join(code for code, _ in ver.reasons)
    if _certified(src) and ver.status == "verified":
        head = (
            "ok",
            "CERTIFIED",
            "signed certificate with verdict pass; verified with the trust store",
        )
    elif _certified(src) and ver.status == "signature_valid":
        head = ("bad", "NOT VALID", f"authentic, but the verifier rejects it: {codes}")
    elif _certified(src) and ver.status == "failed":
        head = (
            "bad",
            "NOT TRUSTED",
            "the certificate claims verdict pass, but its signature failed",
        )
    elif _certified(src):
        head = ("warn", "CERTIFIED AS CLAIMED", "verdict pass, but the signature was not checked")
    elif src.kind == "certificate":
        head = ("bad", "NOT CERTIFIED", f"the certificate records verdict {verdict}")
    elif verdict is not None:
        head = (
            "bad",
            "NOT CERTIFIED",
            f"evaluation verdict: {verdict} — no signed certificate; "
            "this report is built from the evidence and findings",
        )
    else:
        head = (
            "bad",
            "NOT CERTIFIED",
            "evidence only: not evaluated against a policy (give --findings) and not signed",
        )
    cls = {"verified": "ok", "signature_valid": "warn", "failed": "bad"}.get(ver.status, "warn")
    reasons = "".join(f"<br><code>{esc(c)}</code> {esc(m)}" for c, m in ver.reasons)
    label = {
        "verified": "SIGNATURE VERIFIED",
        "signature_valid": "SIGNATURE VALID, CERTIFICATE REJECTED",
        "failed": "SIGNATURE VERIFICATION FAILED",
    }.get(ver.status, "UNVERIFIED")
    return (
        f'<div class="banner {head[0]}">{esc(head[1])}<small>{esc(head[2])}</small></div>'
        f'<div class="banner {cls}">{label}<small>{esc(ver.detail)}{reasons}</small></div>'
    )


def _provenance(src: ReportSource, ver: Verification, evidence_digest: str | None) -> str:
    signed_sections = "summary, findings, operators, module roll-up and every check result"
    verified: list[str] = []
    unverified: list[str] = []
    if ver.signature_ok:
        verified.append(
            f"{signed_sections}: read from the signed statement (payload sha256 "
            f"<code>{esc(src.payload_sha256)}</code>)"
        )
    else:
        unverified.append(
            f"{signed_sections}: read from <code>{esc(src.path.name)}</code> ({esc(ver.detail)})"
        )
    if src.findings_source and src.findings_source != "certificate":
        unverified.append(
            f"findings and verdict: read from <code>{esc(src.findings_source)}</code>, not signed"
        )
    if src.attributions_source and src.kind == "certificate":
        bound = evidence_digest is not None and evidence_bound(src, evidence_digest)
        text = (
            f"integrated-gradient maps: read from <code>{esc(src.attributions_source)}</code>"
            + (
                ", whose digest the certificate names"
                if bound
                else ", which the certificate does not name"
            )
        )
        (verified if bound and ver.signature_ok else unverified).append(text)
    for note in src.notes:
        unverified.append(esc(note))
    parts = ['<div class="card prov"><h3>What this report verified</h3>']
    parts.append(
        "<p><b>Verified by signature:</b></p><ul>"
        + "".join(f"<li>{v}</li>" for v in verified)
        + "</ul>"
        if verified
        else "<p><b>Verified by signature:</b> nothing.</p>"
    )
    if unverified:
        parts.append(
            "<p><b>Not verified:</b></p><ul>"
            + "".join(f"<li>{u}</li>" for u in unverified)
            + "</ul>"
        )
    parts.append("</div>")
    return "".join(parts)


def _validity(src: ReportSource) -> str:
    if not (src.issued_at or src.expires_at):
        return NA
    text = f"{esc(src.issued_at or '?')} → {esc(src.expires_at or '?')}"
    try:
        expires = _dt.datetime.fromisoformat(str(src.expires_at).replace("Z", "+00:00"))
        if expires.tzinfo and expires < _dt.datetime.now(_dt.timezone.utc):
            text += ' <span class="badge b-fail">expired</span>'
    except ValueError:
        pass
    return text


def _digest(ref: dict[str, Any]) -> Any:
    digest = ref.get("digest") or ref.get("sha256")
    return digest.get("sha256", digest) if isinstance(digest, dict) else digest


def _signatures(src: ReportSource, ver: Verification) -> str:
    """Each signature as "name (role), meaning, time" with its status: as verified when the
    verifier ran, else as the certificate claims it, marked not verified."""
    from attest.verification.signatures import signature_line

    if ver.signatures:
        return "<br>".join(esc(signature_line(s)) for s in ver.signatures)
    return "<br>".join(f"<code>{esc(s.get('keyid'))}</code> (not verified)" for s in src.signatures)


def _collected(src: ReportSource) -> str:
    """Who collected each target's evidence, where and when (the certificate's
    evidence_provenance), one line per target; a certificate before it says so."""
    if not src.signed:
        return NA
    from attest.verification.outcome import provenance_lines

    return "<br>".join(esc(line) for line in provenance_lines(src.evidence_provenance))


def _summary(src: ReportSource, ver: Verification) -> str:
    policy = src.policy or {}
    model_pairs = [
        ("model", esc(src.model.get("name")) or NA),
        ("version", esc(src.model.get("version")) or NA),
        ("certificate id", esc(src.certificate_id) if src.certificate_id else NA),
        ("verdict", badge(src.verdict) if src.verdict else '<span class="na">not evaluated</span>'),
        (
            "policy",
            esc(" ".join(str(policy.get(k)) for k in ("id", "name", "version") if policy.get(k)))
            or NA,
        ),
        ("policy digest", f"<code>{esc(_digest(policy))}</code>" if policy else NA),
        ("signatures", _signatures(src, ver) or NA),
        ("evidence collected", _collected(src)),
        ("validity window", _validity(src)),
        ("written by", esc(f"gradient-attest {src.tool_version}") if src.tool_version else NA),
        (
            "input file",
            f"<code>{esc(src.path.name)}</code> sha256 <code>{esc(src.file_sha256)}</code>",
        ),
    ]
    extra = [(k, v) for k, v in src.model.items() if k not in ("name", "version")]
    model_pairs += [(k, esc(fmt_number(v))) for k, v in extra]
    subjects = (
        table(
            ["artifact", "sha256"],
            (
                (
                    [
                        str(s.get("name", "")),
                        Cell(f"<code>{esc((s.get('digest') or {}).get('sha256'))}</code>"),
                    ],
                    {},
                )
                for s in src.subjects
            ),
        )
        if src.subjects
        else na("no artifact digests recorded")
    )
    env = kv_columns(flatten(src.environment)) if src.environment else na()
    dep = (
        kv_columns(flatten(src.deployment), columns=2)
        if src.deployment
        else na("no deployment envelope recorded")
    )
    mm = kv_columns(list(src.model_metrics.items())) if src.model_metrics else na()
    failure = ""
    if src.model_failure:
        f = src.model_failure
        where = " ".join(str(f.get(k)) for k in ("op", "module") if f.get(k))
        failure = (
            f'<div class="banner bad">The model raised in {esc(f.get("phase"))}'
            f"{' at ' + esc(where) if where else ''}<small>{esc(f.get('error_type'))}: "
            f"{esc(f.get('message'))}</small></div>"
        )
    if src.compile_note:
        failure += (
            f'<div class="banner info">The model is compiled (torch.compile)'
            f"<small>{esc(src.compile_note)}</small></div>"
        )
    targets = (
        f"<p>Hardware targets covered: {esc(', '.join(src.targets))}</p>" if src.targets else ""
    )
    return (
        f'<h2 id="summary">Summary</h2>{failure}<div class="grid">'
        f'<div class="card"><h3>Model and certificate</h3>{kv(model_pairs)}</div>'
        f'<div class="card"><h3>Artifacts (digests)</h3>{subjects}</div></div>'
        f'<div class="card wide"><h3>Environment and determinism envelope</h3>{targets}{env}</div>'
        f'<div class="card wide"><h3>Model-level measurements</h3>{mm}</div>'
        f'<div class="card wide"><h3>Deployment envelope</h3>{dep}</div>'
    )


def anchors_of(src: ReportSource) -> Anchors:
    """The operator, module and check ids the page will have."""
    mods, _ = module_rows(src)
    return Anchors(
        op_ids={r.get("id") for r in src.operators if r.get("id") is not None},
        modules={str(r.get("module") or "") for r in mods if "module" in r},
        checks={
            *GRADIENT_CHECKS,
            *IG_CHECKS,
            *TRAINING_CHECKS,
            *src.checks,
            *src.unreadable_checks,
        },
    )


_TOC = (
    ("summary", "Summary"),
    ("findings", "Findings"),
    ("checks", "Checks"),
    ("operators", "Operators"),
    ("modules", "Modules"),
    ("ig", "Integrated gradients"),
    ("gradient-checks", "Gradient checks"),
    ("training", "Training"),
    ("other-checks", "Other checks"),
)


def render_report(
    src: ReportSource, ver: Verification, *, evidence_digest: str | None = None
) -> str:
    """The report as one HTML document (a string)."""
    anchors = anchors_of(src)
    toc = "".join(f'<a href="#{a}">{t}</a>' for a, t in _TOC)
    title = f"Gradient certificate report: {src.model_label}"
    written = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(
        [
            f"<header><h1>{esc(title)}</h1>",
            f'<p class="sub">{esc(src.kind)} <code>{esc(src.path.name)}</code> · report written {written}</p>',
            _banners(src, ver),
            _provenance(src, ver, evidence_digest),
            f'<nav class="toc">{toc}</nav></header>',
            _summary(src, ver),
            findings_section(src, anchors),
            checks_section(src, anchors),
            operators_section(src, flagged_operator_ids(src)),
            ig_section(src, anchors),
            gradient_checks_section(src, anchors),
            training_section(src, anchors),
            training_section_of(src.training_log),
            other_checks_section(src, anchors),
            f"<footer>gradient-attest {esc(__version__)} · self-contained report: nothing is "
            "fetched when it is opened · charts rendered with matplotlib when the report was "
            "written</footer>",
        ]
    )
    return page(title, body)


def write_report(
    source: str | Path,
    out: str | Path,
    *,
    findings: str | Path | None = None,
    trust: str | Path | None = None,
    evidence: str | Path | None = None,
    artifacts: list[str | Path] | None = None,
) -> ReportResult:
    """Read a certificate or evidence file (plus optional findings/evidence) and write the report.

    With ``trust``, a certificate's signature is checked by :mod:`attest.verification.verifier` (and any
    ``artifacts`` against its subjects); otherwise the report marks every number as unverified.
    """
    src = load_source(source)
    if findings is not None and not (src.signed and src.findings_source == "certificate"):
        load_findings(findings, src)  # a certificate's own (signed) findings take precedence
    evidence_digest = None
    if evidence is not None:
        if src.kind == "evidence":
            raise InputError("--evidence is for a certificate input; the input is already evidence")
        attach_evidence(evidence, src)
        evidence_digest = sha256_file(evidence)
    if artifacts and trust is None:
        raise InputError(
            "--artifact is checked against the certificate only with --trust",
            hint="add --trust trust.yaml, or leave out --artifact",
        )
    ver = verify_source(src, trust, artifacts)
    path = atomic_write_text(out, render_report(src, ver, evidence_digest=evidence_digest))
    certified = _certified(src) and ver.status in ("verified", "not_checked")
    return ReportResult(
        path=path, certified=certified, verification=ver, operators=len(src.operators)
    )
