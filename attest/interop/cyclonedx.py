"""The certificate as a CycloneDX 1.6 ML-BOM (``attest export cyclonedx``).

Built with ``cyclonedx-python-lib``: one ``machine-learning-model`` component per model
artefact among the certificate's subjects (weights and ONNX files, and a folder bound through
its manifest that holds one: a MONAI bundle, a Hugging Face folder; :func:`is_model_subject`)
and one ``file``/``data``
component per other subject, each with its SHA-256 (the certificate's digests, unchanged); the
tool in ``metadata.tools``; the certificate as an external reference of type ``attestation``
with its file's SHA-256; serial number and timestamp derived from the certificate, so the same
certificate gives the same BOM.

The library has no model of ``modelCard`` (its ``Component`` has no such property in 11.x), so
the card is added to each model component of the library's JSON and the whole document is then
validated with the library's own strict JSON-schema validator (CycloneDX 1.6):

- ``quantitativeAnalysis.performanceMetrics``: the certificate's headline figures
  (bit-exact reproducibility, minimum stability score, minimum gradient fidelity against
  float64 with the precision as the slice, the IG completeness and randomization results, the
  policy verdict), each as measured and signed;
- ``considerations.technicalLimitations``: every failed and waived finding with its reason
  (and the waiver's approver, justification and reference);
- for a MONAI bundle or Hugging Face folder, its card (task, intended use, authors, changelog:
  :mod:`attest.interop.model_card`).

Each target's evidence provenance (who collected it, on which host, when: the certificate's
``evidence_provenance``) is a BOM property ``gradient-attest:evidence:TARGET``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Final

from attest._version import __version__
from attest.errors import InputError
from attest.interop.model_card import card_of, cyclonedx_card
from attest.interop.source import VerifiedCertificate

__all__ = [
    "MODEL_SUFFIXES",
    "cyclonedx_bom",
    "evidence_provenance",
    "is_model_subject",
    "limitations",
    "performance_metrics",
]

MODEL_SUFFIXES: Final = (".safetensors", ".onnx", ".pt", ".pth", ".ckpt", ".bin", ".h5")
_FOLDER_MODEL_SUFFIXES: Final = (*MODEL_SUFFIXES, ".ts")  # a bundle's TorchScript models/model.ts
_SHARD: Final = re.compile(r":\d+:\d+$")  # a shards manifest's resource: path:start:end
_DATA_SUFFIXES: Final = (".npz", ".npy", ".safetensors")
_NAMESPACE: Final = uuid.UUID("6f0c1d52-7c35-4b1e-9a8e-2d1f0b9c3a10")  # BOM serials from certs


def _metric(kind: str, value: Any, slice_: str | None = None) -> dict[str, Any] | None:
    if value is None:
        return None
    entry = {"type": kind, "value": json.dumps(value) if not isinstance(value, str) else value}
    if slice_:
        entry["slice"] = slice_
    return entry


def performance_metrics(predicate: dict[str, Any]) -> list[dict[str, Any]]:
    metrics = predicate.get("model_metrics") or {}
    checks = predicate.get("checks") or {}
    precision = (predicate.get("environment") or {}).get("precision")
    rows = [
        _metric("bit_exact_reproducibility", metrics.get("bit_exact_reproducibility")),
        _metric("min_stability_score", metrics.get("min_stability_score")),
        _metric("min_fidelity_pct_vs_float64", metrics.get("min_fidelity_pct"), precision),
        _metric(
            "min_grad_fidelity_pct_vs_float64", metrics.get("min_grad_fidelity_pct"), precision
        ),
    ]
    for check_id in ("ig_completeness", "ig_randomization"):
        result = checks.get(check_id) or {}
        rows.append(_metric(f"{check_id}.status", result.get("status")))
        for key, value in sorted((result.get("summary") or {}).items()):
            if isinstance(value, (int, float, bool)):
                rows.append(_metric(f"{check_id}.{key}", value))
    rows.append(_metric("policy_verdict", predicate.get("verdict"), predicate["policy"]["id"]))
    return [r for r in rows if r is not None]


def limitations(predicate: dict[str, Any]) -> list[str]:
    out = []
    for finding in predicate.get("findings") or []:
        verdict = finding.get("verdict")
        if verdict not in ("fail", "waived"):
            continue
        text = f"{verdict}: rule {finding.get('rule')} ({finding.get('check')}): {finding.get('message')}"
        waiver = finding.get("waiver") or {}
        if waiver:
            text += (
                f"; waived by {waiver.get('approved_by') or waiver.get('kind')}: "
                f"{waiver.get('justification')} ({waiver.get('reference') or 'no reference'})"
            )
        out.append(text)
    return out


def evidence_provenance(predicate: dict[str, Any]) -> list[tuple[str, str]]:
    """``(target, line)`` for each target's evidence provenance: who collected it, where, when
    (:func:`attest.verification.outcome.provenance_line`); empty for an older certificate."""
    from attest.verification.outcome import provenance_line

    recorded = predicate.get("evidence_provenance")
    if not isinstance(recorded, dict):
        return []
    return [(str(target), provenance_line(str(target), r)) for target, r in recorded.items()]


def is_model_subject(name: str, predicate: dict[str, Any]) -> bool:
    """Whether the subject ``name`` is a model artefact: a weights or ONNX file, or a folder
    bound through its manifest (``predicate.folders``) with such a file in it."""
    folder = (predicate.get("folders") or {}).get(name)
    if isinstance(folder, dict):
        resources = folder.get("resources") or []
        return any(
            isinstance(r, dict)
            and _SHARD.sub("", str(r.get("name", ""))).endswith(_FOLDER_MODEL_SUFFIXES)
            for r in resources
        )
    return name.endswith(MODEL_SUFFIXES) and "probe" not in name


def cyclonedx_bom(cert: VerifiedCertificate) -> dict[str, Any]:
    """The ML-BOM of a verified certificate, validated (module docstring)."""
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        XsUri,
    )
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    predicate = cert.predicate
    model = predicate["model"]
    components = []
    model_refs: list[str] = []
    for name, digest in sorted(cert.subjects.items()):
        is_model = is_model_subject(name, predicate)
        kind = (
            ComponentType.MACHINE_LEARNING_MODEL
            if is_model
            else ComponentType.DATA
            if name.endswith(_DATA_SUFFIXES)
            else ComponentType.FILE
        )
        ref = f"subject:{name}"
        components.append(
            Component(
                type=kind,
                name=name,
                version=str(model["version"]),
                group=str(model["name"]),
                bom_ref=ref,
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest)],
            )
        )
        if is_model:
            model_refs.append(ref)
    if not model_refs:
        raise InputError("the certificate names no model artefact (weights or ONNX file)")
    tool = Component(type=ComponentType.APPLICATION, name="gradient-attest", version=__version__)
    root = Component(
        type=ComponentType.MACHINE_LEARNING_MODEL,
        name=str(model["name"]),
        version=str(model["version"]),
        bom_ref=f"model:{model['name']}@{model['version']}",
    )
    bom = Bom(
        components=components,
        serial_number=uuid.uuid5(_NAMESPACE, cert.sha256),
        metadata=BomMetaData(component=root, timestamp=_issued(predicate)),
        external_references=[
            ExternalReference(
                type=ExternalReferenceType.ATTESTATION,
                url=XsUri(cert.path.name),
                comment=f"gradient certificate {predicate['certificate_id']} (signed DSSE)",
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=cert.sha256)],
            )
        ],
    )
    bom.metadata.tools.components.add(tool)
    bom.register_dependency(root, components)  # the release is made of its certified files
    data: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    folder_card, root_fields = cyclonedx_card(card_of(predicate))  # a bundle's own card
    card = {
        **folder_card,
        "quantitativeAnalysis": {"performanceMetrics": performance_metrics(predicate)},
        "considerations": {
            **folder_card.get("considerations", {}),
            "technicalLimitations": limitations(predicate),
        },
    }
    for component in data.get("components", []):
        if component.get("bom-ref") in model_refs:
            component["modelCard"] = card
    data.get("metadata", {}).get("component", {}).update(root_fields)
    provenance = evidence_provenance(predicate)
    if provenance:  # CycloneDX has no field for it: name-value properties, our namespace
        data["properties"] = [
            {"name": f"gradient-attest:evidence:{target}", "value": line}
            for target, line in provenance
        ]
    text = json.dumps(data, indent=2, sort_keys=True)
    problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if problem is not None:  # our card or the library's output broke the schema: a bug here
        raise InputError(f"the CycloneDX document does not validate: {problem}")
    return data


def _issued(predicate: dict[str, Any]) -> Any:
    from attest.core.times import parse_timestamp

    return parse_timestamp(str(predicate["issued_at"]))
