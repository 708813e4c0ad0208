"""The report's training section and timing spread: each training check's status, summary and
failing items in an overview, recompute's regions with the memory each frees per second of
recompute, and the per-operator timing spread in the operator table."""

from __future__ import annotations

from pathlib import Path

from _report_samples import make_evidence, write_evidence
from _training_samples import with_training
from test_report_html import parse

from attest.evidence.model import TRAINING_CHECKS
from attest.report.html import write_report


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(f'id="{start}"') : text.index(f'id="{end}"')]


def test_training_section_lists_each_check_with_summary_and_failing_items(
    tmp_path: Path,
) -> None:
    ev = write_evidence(tmp_path / "e.json", with_training(make_evidence()))
    page, text = parse(write_report(ev, tmp_path / "r.html").path)
    assert "training" in page.ids and "#training" in page.hrefs
    training = _section(text, "training", "other-checks")
    overview = training[training.index('id="training-table"') : training.index("</table>")]
    for cid in TRAINING_CHECKS:
        assert f"check-{cid}" in page.ids  # each check's detail, once (the parser checks)
        assert f'href="#check-{cid}"' in overview
    # mixed_precision: its summary figures and its failing parameter, named and linked
    assert "max_grad_rel_error <b>0.00125</b>" in overview
    assert "planted: the float16 gradient of classifier.1.weight underflows" in overview
    assert '<a href="#mod-classifier.1">parameter classifier.1.weight</a>' in overview
    # resume's yes/no figures; batch_invariance not applicable, with its reason
    assert "losses_equal <b>yes</b>" in overview
    assert "declares no batch_sizes" in overview
    # the training checks are not repeated under "Other checks"
    others = text[text.index('id="other-checks"') :]
    assert not any(f"check-{cid}" in others for cid in TRAINING_CHECKS)


def test_recompute_regions_show_memory_freed_per_second_of_recompute(tmp_path: Path) -> None:
    ev = write_evidence(tmp_path / "e.json", with_training(make_evidence()))
    page, text = parse(write_report(ev, tmp_path / "r.html").path)
    assert "recompute-regions" in page.ids and "recompute-plan" in page.ids
    regions = text[text.index('id="recompute-regions"') :]
    regions = regions[: regions.index("</table>")]
    # features.0 frees 3 MiB for 4 ms of recompute: 750 MiB/s; features.4 1 MiB / 2 ms
    assert "750.0 MiB/s" in regions and "500.0 MiB/s" in regions
    assert '<a href="#mod-features.0">' in regions and "3.0 MiB" in regions
    plan = text[text.index('id="recompute-plan"') :]
    assert "4.0 MiB" in plan[: plan.index("</table>")]
    # the plan is a table, not a list squeezed into the scope card
    scope = _section(text, "check-recompute", "recompute-regions")
    assert "adaptive_recompute" not in scope and "checkpoint_patterns" in scope


def test_evidence_without_training_checks_says_so(tmp_path: Path) -> None:
    ev = write_evidence(tmp_path / "e.json", make_evidence())
    page, text = parse(write_report(ev, tmp_path / "r.html").path)
    training = _section(text, "training", "other-checks")
    assert training.count("not in this evidence") == len(TRAINING_CHECKS)
    assert "recompute-regions" not in page.ids


def test_operator_table_shows_the_timing_spread(tmp_path: Path) -> None:
    ev = write_evidence(tmp_path / "e.json", with_training(make_evidence()))
    _, text = parse(write_report(ev, tmp_path / "r.html").path)
    table = text[text.index('id="op-table"') :]
    table = table[: table.index("</table>")]
    for head in ("forward IQR", "forward p95", "backward IQR", "backward p95"):
        assert head in table, head
    row = table[table.index('id="op-3"') :]
    row = row[: row.index("</tr>")]
    # operator 3: forward median 1.8 µs, IQR 10,003 ns, p95 3.6 µs; backward 3.6 µs, 20,003 ns
    assert 'data-v="10003"' in row and 'data-v="3600"' in row and 'data-v="20003"' in row
    assert "10 µs" in row and "3.6 µs" in row and "20 µs" in row
