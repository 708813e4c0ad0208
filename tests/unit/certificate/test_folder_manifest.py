"""Folder manifests: the same bytes as OpenSSF model-signing's (its verifier accepts ours, ours
reads its), shards hashed in parallel agree with a serial read, and every tampering of a
folder is found and named."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from _folder_cases import SHARD, make_folder
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from attest.certificate.folder_hash import hash_ranges, list_folder, shard_ranges
from attest.certificate.folder_manifest import (
    FolderCheck,
    FolderManifest,
    bytes_match,
    check_folder,
    folder_manifest,
    parse_binding,
    parse_statement,
)
from attest.errors import InputError

model_signing = pytest.importorskip("model_signing")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


def _theirs(folder: Path, *, shards: bool = True) -> Any:
    from model_signing import hashing

    config = hashing.Config()
    if shards:
        config = config.use_shard_serialization(shard_size=SHARD)
    return config.set_ignored_paths(paths=[], ignore_git_paths=True).hash(folder)


def _ec_keys(root: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = root / "ms.key", root / "ms.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def _sign_with_model_signing(statement: dict[str, Any], private: Path, out: Path) -> None:
    """Sign our manifest statement with model-signing's own key signer (a Sigstore bundle)."""
    from in_toto_attestation.v1 import resource_descriptor
    from in_toto_attestation.v1 import statement as in_toto
    from model_signing._signing import sign_ec_key, signing

    subject = statement["subject"][0]
    payload = signing.Payload.__new__(signing.Payload)  # its constructor takes its own manifest
    payload.statement = in_toto.Statement(
        subjects=[
            resource_descriptor.ResourceDescriptor(
                name=subject["name"], digest=subject["digest"]
            ).pb
        ],
        predicate_type=statement["predicateType"],
        predicate=statement["predicate"],
    )
    sign_ec_key.Signer(private).sign(payload).write(out)


def _their_verifier(public: Path) -> Any:
    from model_signing import hashing, verifying

    # model-signing 1.1 reads shard_size back from its protobuf JSON as a float and cannot
    # guess its own shard hashing from it (range() of a float); its verifier is therefore
    # given the shard hashing explicitly, as its API allows. Everything else is its own.
    return (
        verifying.Config()
        .use_elliptic_key_verifier(public_key=public)
        .set_hashing_config(hashing.Config().use_shard_serialization(shard_size=SHARD))
    )


def test_our_manifest_is_model_signings(folder: Path) -> None:
    from model_signing._signing import signing

    ours = folder_manifest(folder, shard_size=SHARD)
    theirs = _theirs(folder)
    assert signing.dsse_payload_to_manifest(ours.statement()) == theirs
    assert ours.root_digest == signing.Payload(theirs).statement.pb.subject[0].digest["sha256"]
    assert ours.empty_files == ("tokenizer/__init__.py",)


def test_model_signings_verifier_accepts_our_manifest(folder: Path, tmp_path: Path) -> None:
    private, public = _ec_keys(tmp_path)
    signature = tmp_path / "model.sig"
    _sign_with_model_signing(
        folder_manifest(folder, shard_size=SHARD).statement(), private, signature
    )
    _their_verifier(public).verify(folder, signature)  # raises on any difference
    (folder / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"config\.json"):
        _their_verifier(public).verify(folder, signature)


@pytest.mark.parametrize("shards", [True, False], ids=["shards", "files"])
def test_we_read_model_signings_signature(folder: Path, tmp_path: Path, shards: bool) -> None:
    from model_signing import hashing, signing

    private, _ = _ec_keys(tmp_path)
    signature = tmp_path / "model.sig"
    config = hashing.Config()
    if shards:
        config = config.use_shard_serialization(shard_size=SHARD)
    signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(
        config.set_ignored_paths(paths=[], ignore_git_paths=True)
    ).sign(folder, signature)
    envelope = json.loads(signature.read_text())["dsseEnvelope"]
    manifest = parse_statement(json.loads(base64.b64decode(envelope["payload"])))
    assert manifest.shard_size == (SHARD if shards else None)
    assert ".git" in manifest.ignore
    found = check_folder(folder, manifest)
    if shards:  # model-signing's shards bind no empty file: we refuse an empty file unbound
        assert [rel for rel, _ in found.unexpected] == ["tokenizer/__init__.py"]
        os.remove(folder / "tokenizer" / "__init__.py")
        found = check_folder(folder, manifest)
    assert _clean(found)
    (folder / "tokenizer" / "vocab.txt").write_text("z\n")
    assert check_folder(folder, manifest).changed[0][0] == "tokenizer/vocab.txt"


def _clean(found: FolderCheck) -> bool:
    return not (found.changed or found.missing or found.unexpected)


def test_shards_hashed_in_parallel_agree_with_a_serial_read(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(SHARD * 5 + 123))
    ranges = shard_ranges("big.bin", big.stat().st_size, SHARD)
    assert len(ranges) == 6 and ranges[-1] == ("big.bin", SHARD * 5, SHARD * 5 + 123)
    parallel = hash_ranges(tmp_path, ranges, workers=4)
    serial = hash_ranges(tmp_path, ranges, workers=1)
    data = big.read_bytes()
    assert (
        parallel
        == serial
        == {(r, s, e): hashlib.sha256(data[s:e]).hexdigest() for r, s, e in ranges}
    )
    whole = hash_ranges(tmp_path, shard_ranges("big.bin", len(data), None))
    assert whole[("big.bin", 0, len(data))] == hashlib.sha256(data).hexdigest()  # = sha256sum


def _edit(folder: Path) -> None:
    (folder / "config.json").write_text('{"hidden_size": 9}\n')


def _swap_weights(folder: Path) -> None:
    one, two = (
        folder / "model-00001-of-00002.safetensors",
        folder / "model-00002-of-00002.safetensors",
    )
    first, second = one.read_bytes(), two.read_bytes()
    one.write_bytes(second)  # the two weight files exchanged
    two.write_bytes(first)


def _swap_shards(folder: Path) -> None:
    two = folder / "model-00002-of-00002.safetensors"
    data = bytearray(two.read_bytes())
    data[0], data[SHARD] = data[SHARD] ^ 1, data[0]  # one byte in each of two shards
    two.write_bytes(bytes(data))


def _extra(folder: Path) -> None:
    (folder / "tokenizer" / "special_tokens_map.json").write_text("{}")


def _extra_empty(folder: Path) -> None:
    (folder / "__init__.py").write_bytes(b"")


def _emptied(folder: Path) -> None:
    (folder / "config.json").write_bytes(b"")


def _remove(folder: Path) -> None:
    os.remove(folder / "model-00002-of-00002.safetensors")


def _rename(folder: Path) -> None:
    os.rename(folder / "tokenizer" / "vocab.txt", folder / "tokenizer" / "vocab.txt.bak")


def _symlink_out(folder: Path) -> None:
    outside = folder.parent / "outside.json"
    outside.write_text('{"hidden_size": 8}\n')
    os.remove(folder / "config.json")
    os.symlink(outside, folder / "config.json")  # same bytes, but outside the folder


def _symlink_extra(folder: Path) -> None:
    os.symlink("/etc", folder / "tokenizer" / "etc")


def _git_changed(folder: Path) -> None:
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (folder / ".git" / "objects" / "ab").write_bytes(b"object")
    os.symlink("/etc/passwd", folder / ".git" / "link")


# (tampering, what check_folder reports: "changed" / "missing" / "unexpected", the file named)
TAMPERING = [
    (_edit, [("changed", "config.json")]),
    (
        _swap_weights,
        [
            ("changed", "model-00001-of-00002.safetensors"),
            ("changed", "model-00002-of-00002.safetensors"),
        ],
    ),
    (_swap_shards, [("changed", "model-00002-of-00002.safetensors")]),
    (_extra, [("unexpected", "tokenizer/special_tokens_map.json")]),
    (_extra_empty, [("unexpected", "__init__.py")]),
    (_emptied, [("changed", "config.json")]),
    (_remove, [("missing", "model-00002-of-00002.safetensors")]),
    (_rename, [("missing", "tokenizer/vocab.txt"), ("unexpected", "tokenizer/vocab.txt.bak")]),
    (_symlink_out, [("changed", "config.json")]),
    (_symlink_extra, [("unexpected", "tokenizer/etc")]),
    (_git_changed, []),  # .git is ignored: accepted
]


def _named(found: FolderCheck) -> list[tuple[str, str]]:
    return sorted(
        [("changed", rel) for rel, _ in found.changed]
        + [("missing", rel) for rel in found.missing]
        + [("unexpected", rel) for rel, _ in found.unexpected]
    )


@pytest.mark.parametrize(("tamper", "expected"), TAMPERING, ids=[t.__name__ for t, _ in TAMPERING])
def test_tampering_is_found_and_named(folder: Path, tamper: Any, expected: list[Any]) -> None:
    manifest = folder_manifest(folder, shard_size=SHARD)
    tamper(folder)
    found = check_folder(folder, manifest)
    assert _named(found) == sorted(expected)
    if not expected:
        assert set(found.checked) == manifest.bound


def test_kept_files_are_the_bytes_hashed(folder: Path) -> None:
    manifest = folder_manifest(folder, shard_size=SHARD)
    found = check_folder(folder, manifest, keep=lambda rel: rel.endswith(".safetensors"))
    assert _clean(found)
    name = "model-00001-of-00002.safetensors"
    assert found.contents[name] == (folder / name).read_bytes()
    assert bytes_match(manifest, name, found.contents[name])
    assert not bytes_match(manifest, name, found.contents[name][:-1] + b"x")


def test_certify_refuses_links_and_empty_folders(tmp_path: Path, folder: Path) -> None:
    os.symlink("/etc/hostname", folder / "link")
    with pytest.raises(InputError, match="symbolic link"):
        folder_manifest(folder)
    assert folder_manifest(folder, ignore=["link"]).ignore[0] == "link"
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no files"):
        folder_manifest(tmp_path / "empty")
    with pytest.raises(InputError, match="relative path"):
        folder_manifest(folder, ignore=["../x"])


def _binding(folder: Path) -> tuple[FolderManifest, dict[str, Any]]:
    manifest = folder_manifest(folder, shard_size=SHARD)
    return manifest, manifest.predicate()


def _set(path: list[Any], value: Any) -> Any:
    def change(predicate: dict[str, Any]) -> None:
        target: Any = predicate
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


BROKEN = [
    ("method", _set(["serialization", "method"], "pickle"), "not supported"),
    ("hash", _set(["serialization", "hash_type"], "md5"), "not supported"),
    ("links", _set(["serialization", "allow_symlinks"], True), "symbolic links"),
    ("shard size", _set(["serialization", "shard_size"], 0.5), "whole number"),
    ("escape", _set(["resources", 0, "name"], "../x:0:10"), "relative path"),
    ("digest", _set(["resources", 0, "digest"], "zz"), "sha256"),
    ("gap", _set(["resources", 1, "name"], "model-00001-of-00002.safetensors:9:4096"), "tile"),
    ("ignored", _set(["serialization", "ignore_paths"], ["tokenizer"]), "ignored"),
]


@pytest.mark.parametrize(("what", "change", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_malformed_manifest_is_refused(folder: Path, what: str, change: Any, words: str) -> None:
    manifest, predicate = _binding(folder)
    assert parse_binding("m", predicate, manifest.root_digest).root_digest == manifest.root_digest
    change(predicate)
    with pytest.raises(ValueError, match=words):
        parse_binding("m", predicate)


def test_the_walk_lists_sizes_and_skips_ignored_folders(folder: Path) -> None:
    shutil.rmtree(folder / "tokenizer")
    listing = list_folder(folder, [".git"])
    assert sorted(listing.sizes) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert listing.refused == []


def test_a_kept_file_that_grew_after_the_walk_is_refused(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attest.certificate import folder_manifest as module

    manifest = folder_manifest(folder, shard_size=SHARD)
    real = module.read_kept

    def grow_then_read(root: Any, names: Any, wanted: Any) -> Any:
        with (folder / "config.json").open("ab") as fh:
            fh.write(b"appended after the size was taken")
        return real(root, names, wanted)

    monkeypatch.setattr(module, "read_kept", grow_then_read)
    found = check_folder(folder, manifest, keep=lambda rel: rel == "config.json")
    assert found.changed == [("config.json", "changed while it was read")]
    assert "config.json" not in found.contents
