"""attest report / diff / metrics on the command line, and the headless-Chromium screenshot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _report_samples import findings_for, make_evidence, write_evidence

from attest.cli import main
from attest.report._screenshot import find_chromium


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real entry point (the one place errors become exit codes)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture
def evidence_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    old_ev = make_evidence()
    old = write_evidence(tmp_path / "old.json", old_ev)
    new_ev = make_evidence(version="1.1.0", drop={9: 99.5})
    new = write_evidence(tmp_path / "new.json", new_ev)
    findings = tmp_path / "findings.json"
    findings.write_text(json.dumps(findings_for(new_ev, fail_op=9)), encoding="utf-8")
    return old, new, findings


def test_report_command_writes_html(
    tmp_path: Path, evidence_pair: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, new, findings = evidence_pair
    out = tmp_path / "report.html"
    code, stdout, _ = run(["report", str(new), "-o", str(out), "--findings", str(findings)], capsys)
    assert code == 0
    assert "NOT CERTIFIED" in stdout and str(out) in stdout
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    code, stdout, _ = run(["report", str(new), "-o", str(out), "--json"], capsys)
    doc = json.loads(stdout)
    assert (
        doc["certified"] is False and doc["verification"] == "unsigned" and doc["operators"] == 12
    )


def test_report_bad_input_is_exit_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    code, _, err = run(["report", str(bad), "-o", str(tmp_path / "r.html")], capsys)
    assert code == 2
    assert err.startswith("error:") and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_diff_exit_code_gates_a_release(
    evidence_pair: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, _ = evidence_pair
    code, stdout, _ = run(["diff", str(old), str(new)], capsys)
    assert code == 1
    assert "REGRESSION fidelity" in stdout and "addmm#0 @ classifier.1 (id 9)" in stdout
    code, stdout, _ = run(["diff", str(old), str(new), "--json"], capsys)
    assert code == 1
    doc = json.loads(stdout)
    assert [r["subject"] for r in doc["regressions"]] == ["addmm#0 @ classifier.1 (id 9)"]
    code, stdout, _ = run(["diff", str(old), str(old)], capsys)
    assert code == 0 and "0 regression(s)" in stdout


def test_metrics_command(
    evidence_pair: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, new, _ = evidence_pair
    code, stdout, _ = run(["metrics", str(new), "--format", "openmetrics"], capsys)
    assert code == 0
    assert stdout.endswith("# EOF\n")
    assert 'attest_operator_fidelity_percent{model="digits-cnn"' in stdout


def test_screenshot_without_chromium_says_what_to_install(
    tmp_path: Path, evidence_pair: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from attest.errors import AttestError
    from attest.report._screenshot import screenshot

    _, new, _ = evidence_pair
    html = tmp_path / "r.html"
    from attest.report.html import write_report

    write_report(new, html)
    monkeypatch.setenv("ATTEST_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(AttestError) as exc:
        screenshot(html, tmp_path / "r.png")
    assert "install Debian packages chromium" in exc.value.diagnostics()


def _require_chromium() -> None:
    """Skip without Chromium on a developer's machine; in CI (CI=true) a missing browser fails."""
    if find_chromium() is not None:
        return
    reason = "headless Chromium not installed (apt-get install -y --no-install-recommends chromium)"
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason}; .ci/run installs it, so CI must have it", pytrace=False)
    pytest.skip(reason)


@pytest.mark.parametrize(
    ("ci", "outcome"),
    [("true", pytest.fail.Exception), ("", pytest.skip.Exception), (None, pytest.skip.Exception)],
)
def test_missing_chromium_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, ci: str | None, outcome: type[BaseException]
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "find_chromium", lambda: None)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="apt-get install"):
        _require_chromium()


@pytest.mark.chromium
def test_report_screenshot_in_headless_chromium(
    tmp_path: Path, evidence_pair: tuple[Path, Path, Path]
) -> None:
    """What `make report-screenshot` does: render the report, then screenshot it to PNG."""
    _require_chromium()
    _, new, findings = evidence_pair
    html, png = tmp_path / "report.html", tmp_path / "report.png"
    from attest.report.html import write_report

    write_report(new, html, findings=findings)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attest.report._screenshot",
            str(html),
            str(png),
            "--height",
            "1600",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 1600)
    assert len(data) > 50_000  # a rendered page, not a blank one
