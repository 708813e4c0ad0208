"""The audit archive: one zip that reproduces a release's verdict offline, years later, and
proves it against a trust store the auditor holds.

- :mod:`attest.archive.build`: ``attest archive`` packs a verified release (the member names
  are listed there) and signs its manifest with the archivist's key;
- :mod:`attest.archive.manifest`: the signed manifest, an in-toto Statement over every member
  in a DSSE envelope, and the check of its signature against the ``archivist`` role;
- :mod:`attest.archive.unpack`: the zip read with bounded memory (bombs, zip slip);
- :mod:`attest.archive.verify`: ``attest verify-archive``, step by step.
"""

from __future__ import annotations

from attest.archive.build import build_archive
from attest.archive.manifest import ARCHIVE_FORMAT, ARCHIVIST_ROLE, LEDGER_ROLE
from attest.archive.verify import ArchiveReport, verify_archive

__all__ = [
    "ARCHIVE_FORMAT",
    "ARCHIVIST_ROLE",
    "LEDGER_ROLE",
    "ArchiveReport",
    "build_archive",
    "verify_archive",
]
