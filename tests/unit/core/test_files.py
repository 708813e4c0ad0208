"""One reader for every input file: the same errors, wording and bounds everywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attest.core.files import read_bytes_checked, read_text_checked
from attest.errors import ConfigError, InputError, KeyError_


def test_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert read_bytes_checked(path, what="thing", max_bytes=3) == b"abc"
    assert read_text_checked(path, what="thing", max_bytes=3) == "abc"


@pytest.mark.parametrize("error", [InputError, ConfigError, KeyError_])
def test_missing_file_names_it_with_the_callers_error_and_hint(
    tmp_path: Path, error: type[InputError]
) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(error) as info:
        read_bytes_checked(path, what="policy file", max_bytes=10, error=error, missing_hint="h")
    assert type(info.value) is error
    assert info.value.message == f"policy file {path} does not exist"
    assert info.value.hint == "h"


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory, expected a file"):
        read_bytes_checked(tmp_path, what="trust store", max_bytes=10)


def test_too_large_says_the_size_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 11)
    with pytest.raises(InputError, match=r"is 11 bytes, over the 10-byte limit"):
        read_bytes_checked(path, what="spec", max_bytes=10)


def test_too_large_can_raise_the_callers_exception(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 11)
    with pytest.raises(LookupError):
        read_bytes_checked(path, what="c", max_bytes=10, too_large=lambda: LookupError("big"))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1"
    path.write_bytes(b"caf\xe9")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        read_text_checked(path, what="spec", max_bytes=100, error=ConfigError)


def test_unusable_file_name() -> None:
    with pytest.raises(InputError, match=r"is not a usable file name"):
        read_bytes_checked("a\x00b", what="certificate", max_bytes=10)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_regular_only_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is not a regular file"):
        read_bytes_checked(fifo, what="certificate", max_bytes=10, regular_only=True)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"x")
    path.chmod(0)
    try:
        with pytest.raises(InputError, match=r"is not readable \(permission denied\)"):
            read_bytes_checked(path, what="private key", max_bytes=10)
    finally:
        path.chmod(0o600)
