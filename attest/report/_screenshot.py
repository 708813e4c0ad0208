"""Render an HTML report to a PNG with headless Chromium (Debian package ``chromium``).

``python -m attest.report._screenshot report.html out.png [--width 1280] [--height 4000]``

Used by ``make report-screenshot`` and its test, to look at the report as a reader would.
Chromium runs with networking, sync, updates and the GPU off, in a throw-away profile, so it
neither fetches anything nor touches the user's browser profile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from attest.core.io import atomic_write_bytes
from attest.errors import AttestError, InputError

__all__ = ["find_chromium", "screenshot"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_TIMEOUT_S = 120


def find_chromium() -> str | None:
    """The path of a Chromium binary (``$ATTEST_CHROMIUM`` first), or None."""
    explicit = os.environ.get("ATTEST_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html: str | Path, png: str | Path, *, width: int = 1280, height: int = 4000) -> Path:
    """Write a PNG of the page ``html`` (``width`` x ``height`` CSS pixels) to ``png``."""
    source = Path(html).resolve()
    if not source.is_file():
        raise InputError(
            f"report {source} does not exist",
            hint="write it first: attest report ... -o report.html",
        )
    binary = find_chromium()
    if binary is None:
        raise AttestError(
            "headless Chromium is not installed, so the report cannot be rendered to PNG",
            hint="install Debian packages chromium (apt-get install -y chromium)",
        )
    target = Path(png).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="attest-chromium-") as profile:
        partial = Path(profile) / "shot.png"
        cmd = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}/profile",
            f"--screenshot={partial}",
            f"--window-size={width},{height}",
            source.as_uri(),
        ]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise AttestError(
                f"chromium did not finish within {_TIMEOUT_S} s rendering {source}"
            ) from None
        except OSError as exc:
            raise AttestError(
                f"cannot run {binary}: {exc.strerror}", hint="install Debian packages chromium"
            ) from None
        if not partial.exists() or partial.stat().st_size == 0:
            tail = (done.stderr or "").strip().splitlines()[-3:]
            raise AttestError(
                f"chromium wrote no screenshot (exit {done.returncode}): {' | '.join(tail)}"
            )
        atomic_write_bytes(target, partial.read_bytes(), mode=0o644)
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints an AttestError's diagnostics instead of a traceback."""
    parser = argparse.ArgumentParser(
        prog="python -m attest.report._screenshot", description=__doc__.splitlines()[0]
    )
    parser.add_argument("html")
    parser.add_argument("png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=4000)
    args = parser.parse_args(argv)
    try:
        out = screenshot(args.html, args.png, width=args.width, height=args.height)
    except AttestError as exc:
        print(f"error: {exc.diagnostics()}", file=sys.stderr)
        return exc.exit_code
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
