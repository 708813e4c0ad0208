"""Building blocks of the HTML page: style sheet, the small sort/filter script, escaping,
number formatting and table markup. Kept apart from :mod:`attest.report.html`, which decides
what goes in the report; this module only decides how it looks.

Hand-written because the report must be one self-contained file with no template engine,
JavaScript framework or web font; everything here is standard-library string building with
every value passed through :func:`html.escape`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

CSS = """
:root { --ok:#1f7a45; --bad:#b3261e; --warn:#a15c00; --muted:#5f6b7a; --line:#d5dce4;
        --bg:#f6f8fa; --ink:#17212b; --accent:#1f5fa8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif;
       color: var(--ink); margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 22px 0 8px; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
code, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
.sub { color: var(--muted); margin: 0 0 14px; }
.banner { border-radius: 6px; padding: 12px 16px; margin: 10px 0; font-weight: 600; font-size: 16px;
          border: 1px solid transparent; }
.banner small { display: block; font-weight: 400; font-size: 13px; margin-top: 2px; }
.banner.ok { background: #e7f4ec; border-color: #9fd1b3; color: var(--ok); }
.banner.bad { background: #fdecea; border-color: #f1a9a3; color: var(--bad); }
.banner.warn { background: #fff4e0; border-color: #f3c98a; color: var(--warn); }
.banner.info { background: #eef3f9; border-color: #b9cbe2; color: #234a75; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 14px 24px; }
dl.kv { display: grid; grid-template-columns: minmax(0, max-content) minmax(0, 1fr); gap: 3px 14px; margin: 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; word-break: break-all; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; background: #fff; }
.card h3 { margin-top: 0; }
.card.wide { margin-top: 14px; }
table.kvt th { background: none; color: var(--muted); font-weight: 400; position: static;
               white-space: nowrap; width: 1%; }
table.kvt td { word-break: break-word; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 7px; text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; position: sticky; top: 0; }
.card td code { word-break: break-all; }
#op-table td code { white-space: nowrap; }
#op-table td:last-child { min-width: 320px; }
.card table { table-layout: fixed; }
.card table.kvt { table-layout: auto; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th::after { content: " \\2195"; color: #b8c2cc; font-size: 10px; }
tr.flag td { background: #fdf1f0; }
tr:target td { background: #fff6c7 !important; }
.scroll { max-height: 640px; overflow: auto; border: 1px solid var(--line); border-radius: 6px; }
.scroll table { margin: 0; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 11.5px; font-weight: 600;
         border: 1px solid currentColor; white-space: nowrap; }
.b-fail, .b-failed, .b-error { color: var(--bad); background: #fdecea; }
.b-waived { color: #6a3fa0; background: #f3edfb; }
.b-warn, .b-warning { color: var(--warn); background: #fff4e0; }
.b-pass, .b-passed, .b-computed, .b-verified { color: var(--ok); background: #e7f4ec; }
.b-not_computed, .b-not_applicable, .b-not_implemented, .b-unverified, .b-none { color: var(--muted); background: var(--bg); }
.na { color: var(--muted); font-style: italic; }
.chart { margin: 8px 0 16px; } .chart svg { max-width: 100%; height: auto; }
.filter { margin: 6px 0; padding: 5px 8px; width: 340px; max-width: 100%; border: 1px solid var(--line);
          border-radius: 4px; font: inherit; }
.prov li { margin: 2px 0; }
nav.toc { font-size: 13px; margin: 12px 0 0; } nav.toc a { margin-right: 12px; white-space: nowrap; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); padding-top: 8px; }
details > summary { cursor: pointer; color: var(--accent); margin: 6px 0; }
@media print {
  main { max-width: none; padding: 0; } .filter, nav.toc { display: none; }
  .scroll { max-height: none; overflow: visible; border: 0; }
  h2 { break-after: avoid; } .chart, .card, tr { break-inside: avoid; }
  th { position: static; } a { color: inherit; }
  table { font-size: 9px; } th, td { padding: 2px 3px; }
  #op-table td code { white-space: normal; word-break: break-all; }
  #op-table td:last-child { min-width: 0; }
  details > *:not(summary) { display: block; }
  .banner, .badge, tr.flag td { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""

# A few lines of vanilla JavaScript: click a header to sort, type to filter. The report
# works without it (printed, or with scripts disabled); nothing is fetched.
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var asc = th.getAttribute("data-dir") !== "asc";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("data-dir"); });
      th.setAttribute("data-dir", asc ? "asc" : "desc");
      function key(row) {
        var cell = row.cells[col], v = cell ? cell.getAttribute("data-v") : null;
        if (v !== null && v !== "" && !isNaN(Number(v))) { return Number(v); }
        return cell ? cell.textContent.trim().toLowerCase() : "";
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.querySelectorAll("input.filter").forEach(function (input) {
  var table = document.getElementById(input.getAttribute("data-table"));
  input.addEventListener("input", function () {
    var q = input.value.trim().toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      r.style.display = !q || r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
    });
  });
});
"""


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes included)."""
    return html.escape("" if value is None else str(value), quote=True)


NA = '<span class="na">—</span>'


def na(text: str = "not available in this evidence") -> str:
    """A muted 'not available' paragraph: a section without data says so, it never vanishes."""
    return f'<p class="na">{esc(text)}</p>'


def badge(status: Any) -> str:
    """A coloured status pill (pass/fail/waived/warn/...)."""
    s = str(status if status is not None else "none")
    css = "".join(c if c.isalnum() or c == "_" else "_" for c in s.lower())
    return f'<span class="badge b-{css}">{esc(s)}</span>'


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def fmt_number(value: Any) -> str:
    """Short, honest text for a measured value (no rounding a failure into a pass)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value == 0:
            return "0"
        if abs(value) >= 1e7 or abs(value) < 1e-3:
            return f"{value:.4e}"
        return f"{value:.8g}"  # enough digits that a value near a threshold is not rounded onto it
    if isinstance(value, list | tuple | dict) and not value:
        return "none"
    if isinstance(value, list | tuple):
        return (
            ", ".join(fmt_number(v) for v in value) if len(value) <= 8 else f"[{len(value)} values]"
        )
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt_number(v)}" for k, v in list(value.items())[:8])
    return str(value)


def fmt_pct(value: Any) -> str:
    """A percentage near 100 with enough decimals to show the shortfall (99.99987, not 100.0)."""
    if not _is_number(value):
        return fmt_number(value)
    v = float(value)
    if v >= 100.0:
        return "100"
    short = 100.0 - v
    decimals = min(12, max(2, math.ceil(-math.log10(short)) + 2)) if short > 0 else 2
    return f"{v:.{decimals}f}"


def fmt_bytes(value: Any) -> str:
    """Bytes in binary units."""
    if not _is_number(value):
        return fmt_number(value)
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v):,} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def fmt_ns(value: Any) -> str:
    """Nanoseconds as a readable duration."""
    if not _is_number(value):
        return fmt_number(value)
    v = float(value)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} ns"


def fmt_for_key(key: str) -> Any:
    """The formatter a measurement's name calls for (fidelity %, bytes, nanoseconds...)."""
    k = key.lower()
    if "fidelity" in k and "threshold" not in k:
        return fmt_pct
    if k.endswith("bytes"):
        return fmt_bytes
    if k.endswith("_ns"):
        return fmt_ns
    return fmt_number


@dataclass
class Cell:
    """One table cell: ``html`` is already-safe markup; ``sort`` the value to sort by."""

    html: str
    sort: Any = None
    numeric: bool = False


def cell(value: Any, fmt: Any = fmt_number) -> Cell:
    """A cell from a raw value, formatted by ``fmt`` and sortable by the raw value."""
    numeric = _is_number(value)
    return Cell(esc(fmt(value)) if value is not None else NA, value if numeric else None, numeric)


def table(
    headers: Sequence[str],
    rows: Iterable[tuple[Sequence[Cell | str], dict[str, str]]],
    *,
    table_id: str | None = None,
    sortable: bool = False,
    numeric_cols: Sequence[int] = (),
) -> str:
    """A table; each row is ``(cells, row_attributes)``. String cells are escaped text."""
    attrs = f' id="{esc(table_id)}"' if table_id else ""
    cls = ' class="sortable"' if sortable else ""
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i in numeric_cols else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    body: list[str] = []
    for cells, row_attrs in rows:
        ra = "".join(f' {k}="{esc(v)}"' for k, v in row_attrs.items())
        tds = []
        for c in cells:
            if isinstance(c, str):
                tds.append(f"<td>{esc(c)}</td>")
                continue
            sort = f' data-v="{esc(c.sort)}"' if c.sort is not None else ""
            klass = ' class="num"' if c.numeric else ""
            tds.append(f"<td{klass}{sort}>{c.html}</td>")
        body.append(f"<tr{ra}>{''.join(tds)}</tr>")
    return (
        f"<table{attrs}{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def kv(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (label, already-safe html) pairs."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs)
    return f'<dl class="kv">{items}</dl>' if items else na()


def kv_columns(pairs: Sequence[tuple[str, Any]], *, columns: int = 3) -> str:
    """Many (name, raw value) pairs in a compact table of ``columns`` name/value column pairs,
    filled top to bottom. Unset values (None) read "unset"."""
    if not pairs:
        return na()
    rows = -(-len(pairs) // columns)
    body = []
    for r in range(rows):
        cells = []
        for c in range(columns):
            i = c * rows + r
            if i < len(pairs):
                name, value = pairs[i]
                text = "unset" if value is None else fmt_for_key(name)(value)
                klass = ' class="na"' if value is None else ""
                cells.append(f'<th scope="row">{esc(name)}</th><td{klass}>{esc(text)}</td>')
            else:
                cells.append("<th></th><td></td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table class="kvt"><tbody>{"".join(body)}</tbody></table>'


def flatten(mapping: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as dotted keys, for the environment and parameter tables."""
    out: list[tuple[str, Any]] = []
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.extend(flatten(value, name + "."))
        else:
            out.append((name, value))
    return out


def page(title: str, body: str) -> str:
    """The whole document: one file, inline style and script, nothing fetched."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main><script>{SCRIPT}</script></body></html>\n"
    )
