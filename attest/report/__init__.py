"""Reports for people: the HTML certificate report, the diff between releases, and
OpenMetrics figures for monitoring.

::

    from attest.report import write_report, diff_files, openmetrics_text
    write_report("gradient_certificate.json", "report.html", trust="trust.yaml")
    result = diff_files("v1/evidence.json", "v2/evidence.json")
    print(result.regressions)

Names are imported lazily (PEP 562): the diff and metrics export do not load matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from attest.report.diff import DiffResult, DiffTolerances, diff_files, diff_sources
    from attest.report.html import ReportResult, render_report, write_report
    from attest.report.metrics import openmetrics_text

__all__ = [
    "DiffResult",
    "DiffTolerances",
    "ReportResult",
    "diff_files",
    "diff_sources",
    "openmetrics_text",
    "render_report",
    "write_report",
]

_LAZY: dict[str, str] = {
    "DiffResult": "attest.report.diff",
    "DiffTolerances": "attest.report.diff",
    "diff_files": "attest.report.diff",
    "diff_sources": "attest.report.diff",
    "ReportResult": "attest.report.html",
    "render_report": "attest.report.html",
    "write_report": "attest.report.html",
    "openmetrics_text": "attest.report.metrics",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'attest.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
