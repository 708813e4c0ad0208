"""A MONAI bundle's or Hugging Face folder's card (``predicate.model.card``) in the exports.

The signed card (:class:`attest.certificate.model_card.ModelCard`) is mapped onto the fields
each format has for it, and onto named properties where it has none:

| card | CycloneDX 1.6 | SPDX 3.0.1 AI |
| --- | --- | --- |
| task | ``modelCard.modelParameters.task`` | ``ai_domain`` |
| architecture, model_type | ``modelParameters.modelArchitecture``, ``.architectureFamily`` | ``ai_typeOfModel`` |
| intended_use | ``modelCard.considerations.useCases`` | ``ai_informationAboutApplication`` |
| data_source | property ``attest:model:data_source`` | ``ai_informationAboutTraining`` |
| authors | ``metadata.component.authors`` | ``originatedBy`` (a Person each) |
| description | ``metadata.component.description`` | ``description`` |
| copyright | ``metadata.component.copyright`` | ``software_copyrightText`` |
| changelog, format, other keys | properties ``attest:model:...`` | ``comment`` (one line each) |
"""

from __future__ import annotations

from typing import Any

__all__ = ["card_lines", "card_of", "cyclonedx_card"]

# keys with a field of their own in both formats; every other key is a property / comment line
_FIELDS = frozenset(
    {"task", "architecture", "model_type", "intended_use", "authors", "description", "copyright"}
)


def card_of(predicate: dict[str, Any]) -> dict[str, Any]:
    """The certificate's model card ({} when the model came from a factory and weights)."""
    card = predicate.get("model", {}).get("card")
    return dict(card) if isinstance(card, dict) else {}


def card_lines(card: dict[str, Any]) -> list[tuple[str, str]]:
    """``(attest:model:KEY, text)`` for the card's keys without a field of their own, the
    changelog one entry per version (``attest:model:changelog:0.2.1``)."""
    lines: list[tuple[str, str]] = []
    for key, value in sorted(card.items()):
        if key in _FIELDS:
            continue
        if key == "changelog" and isinstance(value, dict):
            lines += [(f"attest:model:changelog:{v}", str(t)) for v, t in sorted(value.items())]
        else:
            lines.append((f"attest:model:{key}", str(value)))
    return lines


def cyclonedx_card(card: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(additions to each model component's ``modelCard``, additions to the BOM's
    ``metadata.component``)."""
    parameters = {
        name: card[key]
        for key, name in (
            ("task", "task"),
            ("architecture", "modelArchitecture"),
            ("model_type", "architectureFamily"),
        )
        if key in card
    }
    model_card: dict[str, Any] = {}
    if parameters:
        model_card["modelParameters"] = parameters
    if "intended_use" in card:
        model_card["considerations"] = {"useCases": [card["intended_use"]]}
    lines = card_lines(card)
    if lines:
        model_card["properties"] = [{"name": name, "value": text} for name, text in lines]
    root: dict[str, Any] = {}
    if card.get("authors"):
        root["authors"] = [{"name": name} for name in card["authors"]]
    for key in ("description", "copyright"):
        if key in card:
            root[key] = card[key]
    return model_card, root
