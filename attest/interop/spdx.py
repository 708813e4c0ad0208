"""The certificate as an SPDX 3.0.1 document with the AI profile (``attest export spdx``).

Built with the SPDX project's generated bindings (``spdx-python-model``, JSON-LD):

- one ``ai_AIPackage`` per model artefact among the certificate's subjects (weights, ONNX),
  with its SHA-256 in ``verifiedUsing``, the model version, the release time (the certificate's
  ``issued_at``), ``ai_metric`` entries holding the headline figures (the same as the CycloneDX
  model card: :func:`attest.interop.cyclonedx.performance_metrics`) and ``ai_limitation`` the
  failed and waived findings;
- one ``software_File`` per other subject (spec, probe inputs, probe bundle) with its SHA-256;
- the certificate itself as a ``software_File`` (purpose ``evidence``) with its SHA-256, and a
  ``hasEvidence`` relationship from every model package to it; its comment names each
  target's evidence provenance (collector, host, time);
- the tool as the creating agent and tool;
- for a MONAI bundle or Hugging Face folder, its card on each model package (domain, type of
  model, intended use, training data, authors: :mod:`attest.interop.model_card`).

Identifiers are derived from the certificate's digest, so the same certificate gives the same
document.
"""

from __future__ import annotations

import io
from typing import Any

from attest._version import __version__
from attest.core.times import parse_timestamp
from attest.interop.cyclonedx import (
    evidence_provenance,
    is_model_subject,
    limitations,
    performance_metrics,
)
from attest.interop.model_card import card_lines, card_of
from attest.interop.source import VerifiedCertificate

__all__ = ["spdx_document"]


def spdx_document(cert: VerifiedCertificate) -> bytes:
    """The SPDX 3.0.1 JSON-LD document of a verified certificate (module docstring)."""
    from spdx_python_model import v3_0_1 as spdx

    base = f"https://gradient-attest.dev/spdx/{cert.sha256}"
    predicate = cert.predicate
    issued = parse_timestamp(str(predicate["issued_at"]))
    objects = spdx.SHACLObjectSet()
    agent = objects.add(spdx.SoftwareAgent(spdxId=f"{base}/agent", name="gradient-attest"))
    info = spdx.CreationInfo(specVersion="3.0.1", created=issued, createdBy=[agent])
    agent.creationInfo = info
    tool = objects.add(
        spdx.Tool(spdxId=f"{base}/tool", name=f"gradient-attest {__version__}", creationInfo=info)
    )
    info.createdUsing = [tool]

    def sha256(value: str) -> Any:
        return spdx.Hash(algorithm=spdx.HashAlgorithm.sha256, hashValue=value)

    certificate = objects.add(
        spdx.software_File(
            spdxId=f"{base}/certificate",
            name=cert.path.name,
            creationInfo=info,
            verifiedUsing=[sha256(cert.sha256)],
            software_primaryPurpose=spdx.software_SoftwarePurpose.evidence,
            comment=f"gradient certificate {predicate['certificate_id']} (signed DSSE)"
            + "".join(f"; evidence {line}" for _, line in evidence_provenance(predicate)),
        )
    )
    metrics = [
        spdx.DictionaryEntry(
            key=m["type"] + (f"[{m['slice']}]" if "slice" in m else ""), value=m["value"]
        )
        for m in performance_metrics(predicate)
    ]
    limits = "\n".join(limitations(predicate)) or None
    model = predicate["model"]
    card = card_of(predicate)
    authors = [  # a bundle's authors, as its card names them
        objects.add(spdx.Person(spdxId=f"{base}/author/{i}", name=name, creationInfo=info))
        for i, name in enumerate(card.get("authors") or [])
    ]
    elements: list[Any] = [agent, tool, certificate, *authors]
    packages = []
    for index, (name, digest) in enumerate(sorted(cert.subjects.items())):
        element: Any
        if is_model_subject(name, predicate):
            element = spdx.ai_AIPackage(
                spdxId=f"{base}/subject/{index}",
                name=name,
                creationInfo=info,
                software_packageVersion=str(model["version"]),
                software_downloadLocation="NOASSERTION",
                software_primaryPurpose=spdx.software_SoftwarePurpose.model,
                releaseTime=issued,
                verifiedUsing=[sha256(digest)],
                ai_metric=metrics,
                summary=f"{model['name']} {model['version']}",
            )
            if limits:
                element.ai_limitation = limits
            _describe(element, card, authors)
            packages.append(element)
        else:
            element = spdx.software_File(
                spdxId=f"{base}/subject/{index}",
                name=name,
                creationInfo=info,
                verifiedUsing=[sha256(digest)],
            )
        elements.append(objects.add(element))
    for index, package in enumerate(packages):
        elements.append(
            objects.add(
                spdx.Relationship(
                    spdxId=f"{base}/evidence/{index}",
                    creationInfo=info,
                    from_=package,
                    relationshipType=spdx.RelationshipType.hasEvidence,
                    to=[certificate],
                )
            )
        )
    objects.add(
        spdx.SpdxDocument(
            spdxId=f"{base}/document",
            name=f"{model['name']} {model['version']} (gradient certificate)",
            creationInfo=info,
            rootElement=packages or [certificate],
            element=elements,
            dataLicense="https://spdx.org/licenses/CC0-1.0",
        )
    )
    out = io.BytesIO()
    spdx.JSONLDSerializer().write(objects, out)
    return out.getvalue()


def _describe(package: Any, card: dict[str, Any], authors: list[Any]) -> None:
    """A MONAI bundle's or Hugging Face folder's card on a model package
    (:mod:`attest.interop.model_card`)."""
    if not card:
        return
    if "task" in card:
        package.ai_domain = [card["task"]]
    types = [card[k] for k in ("architecture", "model_type") if k in card]
    if types:
        package.ai_typeOfModel = types
    if "intended_use" in card:
        package.ai_informationAboutApplication = card["intended_use"]
    if "data_source" in card:
        package.ai_informationAboutTraining = card["data_source"]
    if "description" in card:
        package.description = card["description"]
    if "copyright" in card:
        package.software_copyrightText = card["copyright"]
    if authors:
        package.originatedBy = authors
    lines = card_lines(card)
    if lines:
        package.comment = "\n".join(f"{name}: {text}" for name, text in lines)
