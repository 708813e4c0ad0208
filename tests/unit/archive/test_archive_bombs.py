"""Bounded decompression in ``attest verify-archive`` (issue 33, item 7): a table of zip
bombs, each reproduced first where main was vulnerable (zipfile's own ``read`` allocates what
the member really inflates to, whatever it declares), then refused, through the library and
the command line, with peak memory (tracemalloc) a small fraction of the bomb."""

from __future__ import annotations

import gzip
import io
import json
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _archive_kit import Release, make_release, members, relist, rezip
from _cli_run import run

from attest.archive import unpack, verify_archive
from attest.errors import AttestError, InputError

BOMB = 32 * 1024 * 1024  # what one bomb member inflates to
BOUND = 4 * 1024 * 1024  # the most verify-archive may hold at once for these archives


def _peak(action: Callable[[], Any]) -> tuple[Any, int]:
    """``action``'s result (or the exception it raised) and the peak of traced memory."""
    tracemalloc.start()
    try:
        outcome = action()
    except Exception as exc:  # the outcome under test, checked by the caller
        outcome = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return outcome, peak


@pytest.fixture(scope="module")
def zeros() -> bytes:
    return bytes(BOMB)


def _zip(path: Path, entries: list[tuple[str, bytes, dict[str, Any]]]) -> Path:
    """A zip whose central directory says what each entry's ``fake`` says (file_size, CRC,
    flag bits, method), whatever the data is: the reader trusts the central directory."""
    buffer = io.BytesIO()
    archive = zipfile.ZipFile(buffer, "w")
    for name, data, fake in entries:
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = fake.pop("method", zipfile.ZIP_DEFLATED)
        archive.writestr(info, data)
        written = archive.infolist()[-1]
        for field, value in fake.items():
            setattr(written, field, value)
    archive.close()
    path.write_bytes(buffer.getvalue())
    return path


def lying_declared_size(r: Release, zeros: bytes) -> Path:
    return _zip(r.root / "bomb.zip", [("evidence.json", zeros, {"file_size": 10})])


def lying_size_with_matching_crc(r: Release, zeros: bytes) -> Path:
    crc = zlib.crc32(bytes(10))
    return _zip(r.root / "bomb.zip", [("evidence.json", zeros, {"file_size": 10, "CRC": crc})])


def many_lying_members(r: Release, zeros: bytes) -> Path:
    part = zeros[: BOMB // 4]
    return _zip(r.root / "bomb.zip", [(f"m{i}.json", part, {"file_size": 10}) for i in range(16)])


def lzma_member(r: Release, zeros: bytes) -> Path:
    return _zip(r.root / "bomb.zip", [("evidence.json", zeros, {"method": zipfile.ZIP_LZMA})])


def encrypted_member(r: Release, zeros: bytes) -> Path:
    return _zip(r.root / "bomb.zip", [("evidence.json", b"{}", {"flag_bits": 0x1})])


def zip64_declares_a_terabyte(r: Release, zeros: bytes) -> Path:
    return _zip(r.root / "bomb.zip", [("evidence.json", b"{}", {"file_size": 1 << 40})])


def over_member_count(r: Release, zeros: bytes) -> Path:
    return _zip(r.root / "bomb.zip", [(f"m{i}", b"", {}) for i in range(unpack.MAX_MEMBERS + 1)])


def zip_slip_name(r: Release, zeros: bytes) -> Path:
    return _zip(r.root / "bomb.zip", [("../../etc/cron.d/evil", b"x", {})])


def nested_zip(r: Release, zeros: bytes) -> Path:
    """A genuine signed archive whose evidence is swapped for a zip bomb (never opened)."""
    inner = lying_declared_size(r, zeros).read_bytes()
    files = members(r.build())
    files["evidence.json"] = inner
    return rezip(r.root / "nested.zip", relist(files))


def _zipfile_read_all(path: Path) -> None:
    """What main did: ``ZipFile.read`` of every member."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            archive.read(info)


ROWS: list[tuple[Callable[[Release, bytes], Path], str, bool]] = [
    # (bomb, outcome: a reason code or "InputError", reproduced on main's zipfile.read)
    (lying_declared_size, "ARCHIVE_INVALID", True),
    (lying_size_with_matching_crc, "ARCHIVE_INVALID", True),
    (many_lying_members, "ARCHIVE_INVALID", True),
    (lzma_member, "ARCHIVE_INVALID", True),
    (encrypted_member, "ARCHIVE_INVALID", False),
    (zip64_declares_a_terabyte, "InputError", False),
    (over_member_count, "InputError", False),
    (zip_slip_name, "ARCHIVE_INVALID", False),
    (nested_zip, "ARCHIVE_INVALID", False),
]


@pytest.mark.parametrize(
    ("bomb", "outcome", "reproduced"), ROWS, ids=[b.__name__ for b, _, _ in ROWS]
)
def test_bomb_is_refused_within_bounded_memory(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    zeros: bytes,
    bomb: Callable[[Release, bytes], Path],
    outcome: str,
    reproduced: bool,
) -> None:
    r = make_release(tmp_path)
    path = bomb(r, zeros)
    assert path.stat().st_size < 2 * 1024 * 1024
    if reproduced:
        _, before = _peak(lambda: _zipfile_read_all(path))
        assert before >= BOMB // 4, before  # main held the inflated bytes at once
    result, peak = _peak(lambda: verify_archive(path, trust=r.auditor))
    assert peak < BOUND, peak
    if outcome == "InputError":
        assert isinstance(result, InputError), result
    else:
        assert not isinstance(result, Exception), result
        assert not result.verified and result.reasons[0][0] == outcome, result.reasons
    code, out, err = run(capsys, "verify-archive", path, "--trust", r.auditor, "--json")
    if outcome == "InputError":
        assert code == 2 and str(path) in err and "over" in err, err
    else:
        assert code == 1 and json.loads(out)["reasons"][0]["code"] == outcome


def test_each_member_and_all_of_them_are_capped_as_unpacked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Honest sizes over lowered caps: one member, then many small ones."""
    r = make_release(tmp_path)
    path = r.build()
    monkeypatch.setattr(unpack, "MAX_MEMBER_BYTES", 1024)
    with pytest.raises(InputError, match="over the 1024-byte limit of one member"):
        verify_archive(path, trust=r.auditor)
    code, _, err = run(capsys, "verify-archive", path, "--trust", r.auditor)
    assert code == 2 and "limit of one member" in err
    monkeypatch.setattr(unpack, "MAX_MEMBER_BYTES", 1 << 20)
    monkeypatch.setattr(unpack, "MAX_UNPACKED_BYTES", 4096)
    with pytest.raises(InputError, match="unpacked bytes, over the 4096-byte limit"):
        verify_archive(path, trust=r.auditor)


def test_the_stream_is_counted_not_the_declaration(zeros: bytes) -> None:
    """read_capped stops a stream that produces more than the cap, holding at most one chunk
    over it, whatever the stream claimed (here a gzip bomb with no size at all)."""
    packed = gzip.compress(zeros, compresslevel=9)
    assert len(packed) < 64 * 1024
    result, peak = _peak(
        lambda: unpack.read_capped(gzip.GzipFile(fileobj=io.BytesIO(packed)), 1 << 20, "bomb")
    )
    assert isinstance(result, AttestError) and "more than 1048576 bytes" in result.message
    assert peak < BOUND, peak
    assert unpack.read_capped(io.BytesIO(b"x" * 1000), 1000, "fits") == b"x" * 1000
