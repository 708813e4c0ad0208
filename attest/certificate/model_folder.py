"""The files of a MONAI bundle or Hugging Face folder that a certificate binds.

:func:`folder_subjects` is the one place where they are chosen: today every regular file
under the folder, each a subject named ``FOLDER/relative/path`` and hashed with the walk the
verifier uses (:func:`attest.certificate.artifacts.hash_directory`), so ``attest verify CERT
--artifact FOLDER/`` checks the folder as a whole: a changed file is SUBJECT_MISMATCH, a
missing one ARTIFACT_MISSING, an extra one "not a subject of the certificate". A folder
holding a symbolic link or a special file is refused (a Hugging Face cache snapshot links
its files to blobs: copy it with ``cp -rL`` or download it with ``--local-dir``).
"""

from __future__ import annotations

from pathlib import Path

from attest.certificate.artifacts import hash_directory
from attest.errors import InputError

__all__ = ["folder_subjects"]


def folder_subjects(root: Path, name: str | None = None) -> dict[str, str]:
    """``{FOLDER/relative/path: sha256}`` for every file of the folder (``name``: FOLDER,
    default the folder's name)."""
    prefix = name or root.resolve().name
    try:
        listing = hash_directory(root)
    except OSError as exc:
        raise InputError(f"cannot read the model folder {root}: {exc.strerror}") from None
    if listing.refused:
        rel, why = listing.refused[0]
        raise InputError(
            f"{root / rel} is {why}; a certified model folder holds only regular files",
            hint="copy the folder with its links resolved (cp -rL), or download it with "
            "--local-dir rather than into the Hugging Face cache",
        )
    if not listing.digests:
        raise InputError(f"the model folder {root} holds no files")
    return {f"{prefix}/{rel}": digest for rel, digest in sorted(listing.digests.items())}
