"""JSON Schemas in ``schemas/`` are generated from the pydantic models: one source of truth.

``python -m attest._schemas write`` regenerates them; ``check`` (used by a test) fails when a
checked-in schema drifts from its model. Add a line to :data:`SCHEMAS` for each new file.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

# schema file name -> "module:ModelName"
SCHEMAS: dict[str, str] = {
    "evidence.schema.json": "attest.evidence:Evidence",
    "statement.schema.json": "attest.certificate:Statement",
    "policy.schema.json": "attest.policy:Policy",
    "findings.schema.json": "attest.policy:Findings",
    "ledger-entry.schema.json": "attest.ledger.entries:LedgerEntry",
    "ledger-inclusion-proof.schema.json": "attest.ledger.proofs:InclusionProofFile",
    "ledger-consistency-proof.schema.json": "attest.ledger.proofs:ConsistencyProofFile",
}

ROOT = Path(__file__).resolve().parent.parent / "schemas"
# Schemas read at run time (the verifier validates payloads against statement.schema.json)
# must exist in an installed wheel too, which has no repository schemas/ folder: they are also
# written to, and drift-checked in, attest/schemas/ (package data).
PACKAGED: frozenset[str] = frozenset({"statement.schema.json"})
PACKAGE_ROOT = Path(__file__).resolve().parent / "schemas"


def generate(target: str) -> dict[str, Any]:
    """The JSON Schema of one pydantic model named ``module:Name``."""
    module_name, _, attr = target.partition(":")
    model = getattr(importlib.import_module(module_name), attr)
    schema: dict[str, Any] = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write(root: Path = ROOT) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for name, target in SCHEMAS.items():
        path = root / name
        path.write_text(render(generate(target)), encoding="utf-8")
        written.append(path)
        if name in PACKAGED and root == ROOT:
            PACKAGE_ROOT.mkdir(parents=True, exist_ok=True)
            (PACKAGE_ROOT / name).write_text(render(generate(target)), encoding="utf-8")
            written.append(PACKAGE_ROOT / name)
    return written


def drift(root: Path = ROOT) -> list[str]:
    """Names of schema files that are missing or differ from their model."""
    out = []
    for name, target in SCHEMAS.items():
        path = root / name
        if not path.exists() or path.read_text(encoding="utf-8") != render(generate(target)):
            out.append(name)
        packaged = PACKAGE_ROOT / name
        if (
            name in PACKAGED
            and root == ROOT
            and (
                not packaged.exists()
                or packaged.read_text(encoding="utf-8") != render(generate(target))
            )
        ):
            out.append(f"attest/schemas/{name}")
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        for p in write():
            print(p)
    else:
        bad = drift()
        print("\n".join(bad) or "schemas up to date")
        sys.exit(1 if bad else 0)
