"""RFC 6962 hashing and RFC 9162 proofs: the transparency-dev vectors and a brute-force reference."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from attest.ledger import merkle

REPO_ROOT = Path(__file__).resolve().parents[3]
VECTORS = REPO_ROOT / "tests" / "vectors" / "rfc6962"  # vendored, see tests/vectors/README.md


def _cases(kind: str) -> list[Path]:
    return sorted((VECTORS / kind).rglob("*.json"))


def _b64(value: str | None) -> bytes:
    return base64.b64decode(value) if value else b""


def _proof(case: dict[str, Any]) -> list[bytes]:
    return [_b64(p) for p in case["proof"] or []]


# --- brute-force reference: RFC 9162 sections 2.1.1, 2.1.3.1, 2.1.4.1 as literal recursion ---


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(hashes: Sequence[bytes]) -> bytes:
    if not hashes:
        return merkle.EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = _k(len(hashes))
    return merkle.node_hash(ref_mth(hashes[:k]), ref_mth(hashes[k:]))


def ref_path(m: int, hashes: Sequence[bytes]) -> list[bytes]:
    if len(hashes) <= 1:
        return []
    k = _k(len(hashes))
    if m < k:
        return [*ref_path(m, hashes[:k]), ref_mth(hashes[k:])]
    return [*ref_path(m - k, hashes[k:]), ref_mth(hashes[:k])]


def ref_subproof(m: int, hashes: Sequence[bytes], whole: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if whole else [ref_mth(hashes)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, hashes[:k], whole), ref_mth(hashes[k:])]
    return [*ref_subproof(m - k, hashes[k:], False), ref_mth(hashes[:k])]


def _reader(hashes: Sequence[bytes]) -> merkle.NodeReader:
    """Perfect-subtree lookups answered by brute force, counting what is asked."""

    def read(keys: Sequence[merkle.NodeKey]) -> list[bytes]:
        for level, index in keys:
            assert (index + 1) << level <= len(hashes), "asked for a subtree outside the tree"
        return [ref_mth(hashes[index << level : (index + 1) << level]) for level, index in keys]

    return read


# --- vectors ---------------------------------------------------------------------------------


def test_tree_roots_match_reference_tree() -> None:
    tree = json.loads((VECTORS / "tree.json").read_text())
    leaves = [merkle.leaf_hash(bytes.fromhex(x)) for x in tree["leaves"]]
    assert merkle.EMPTY_ROOT.hex() == tree["empty_tree_root"]
    assert merkle.root_from_leaf_hashes([]) == merkle.EMPTY_ROOT
    for n, want in enumerate(tree["roots"], start=1):
        assert merkle.root_from_leaf_hashes(leaves[:n]).hex() == want
        assert ref_mth(leaves[:n]).hex() == want


@pytest.mark.parametrize("path", _cases("inclusion"), ids=lambda p: str(p.relative_to(VECTORS)))
def test_inclusion_vector(path: Path) -> None:
    case = json.loads(path.read_text())
    ok = merkle.verify_inclusion(
        case["leafIdx"], case["treeSize"], _b64(case["leafHash"]), _proof(case), _b64(case["root"])
    )
    assert ok is (not case["wantErr"]), case["desc"]


@pytest.mark.parametrize("path", _cases("consistency"), ids=lambda p: str(p.relative_to(VECTORS)))
def test_consistency_vector(path: Path) -> None:
    case = json.loads(path.read_text())
    ok = merkle.verify_consistency(
        case["size1"], case["size2"], _b64(case["root1"]), _b64(case["root2"]), _proof(case)
    )
    assert ok is (not case["wantErr"]), case["desc"]


def test_every_vector_is_exercised() -> None:
    # guards against the parametrization silently finding nothing
    assert len(_cases("inclusion")) >= 80
    assert len(_cases("consistency")) >= 80
    happy = [
        p
        for p in _cases("inclusion") + _cases("consistency")
        if not json.loads(p.read_text())["wantErr"]
    ]
    assert len(happy) >= 10


def test_generated_proofs_equal_vector_happy_paths() -> None:
    tree = json.loads((VECTORS / "tree.json").read_text())
    leaves = [merkle.leaf_hash(bytes.fromhex(x)) for x in tree["leaves"]]
    read = _reader(leaves)
    for path in _cases("inclusion"):
        case = json.loads(path.read_text())
        if (
            case["wantErr"]
            or case["treeSize"] > len(leaves)
            or _b64(case["leafHash"]) != leaves[case["leafIdx"]]
        ):
            continue
        assert merkle.inclusion_proof(read, case["leafIdx"], case["treeSize"]) == _proof(case)
    for path in _cases("consistency"):
        case = json.loads(path.read_text())
        if case["wantErr"] or not 0 < case["size1"] < case["size2"] <= len(leaves):
            continue
        assert merkle.consistency_proof(read, case["size1"], case["size2"]) == _proof(case)


# --- brute force on random trees ---------------------------------------------------------------


def test_proofs_match_brute_force_on_every_small_tree() -> None:
    hashes = [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(40)]
    read = _reader(hashes)
    for n in range(1, len(hashes) + 1):
        root = ref_mth(hashes[:n])
        for i in range(n):
            proof = merkle.inclusion_proof(read, i, n)
            assert proof == ref_path(i, hashes[:n])
            assert merkle.verify_inclusion(i, n, hashes[i], proof, root)
            assert not merkle.verify_inclusion(i, n, hashes[(i + 1) % 40], proof, root)
        for m in range(1, n + 1):
            proof = merkle.consistency_proof(read, m, n)
            assert proof == ref_subproof(m, hashes[:n], True)
            assert merkle.verify_consistency(m, n, ref_mth(hashes[:m]), root, proof)


def test_proofs_match_brute_force_on_random_large_trees() -> None:
    rng = random.Random(6962)
    hashes = [rng.randbytes(32) for _ in range(3000)]
    # precomputed perfect subtrees so the reference stays fast at a few thousand leaves
    levels = [hashes]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append(
            [merkle.node_hash(below[j], below[j + 1]) for j in range(0, len(below) - 1, 2)]
        )

    def read(keys: Sequence[merkle.NodeKey]) -> list[bytes]:
        return [levels[level][index] for level, index in keys]

    for _ in range(60):
        n = rng.randint(1, len(hashes))
        root = ref_mth(hashes[:n])
        assert merkle.root_from_leaf_hashes(hashes[:n]) == root
        assert merkle.subtree_hash(read, 0, n) == root
        i = rng.randrange(n)
        proof = merkle.inclusion_proof(read, i, n)
        assert proof == ref_path(i, hashes[:n])
        assert merkle.verify_inclusion(i, n, hashes[i], proof, root)
        m = rng.randint(1, n)
        cproof = merkle.consistency_proof(read, m, n)
        assert cproof == ref_subproof(m, hashes[:n], True)
        assert merkle.verify_consistency(m, n, ref_mth(hashes[:m]), root, cproof)


def test_tampered_proofs_are_rejected() -> None:
    rng = random.Random(9162)
    hashes = [rng.randbytes(32) for _ in range(100)]
    read = _reader(hashes)
    root = ref_mth(hashes)
    proof = merkle.inclusion_proof(read, 37, 100)
    for position in range(len(proof)):
        bad = list(proof)
        bad[position] = bytes([bad[position][0] ^ 1]) + bad[position][1:]
        assert not merkle.verify_inclusion(37, 100, hashes[37], bad, root)
    assert not merkle.verify_inclusion(37, 100, hashes[37], proof[:-1], root)
    assert not merkle.verify_inclusion(37, 100, hashes[37], [*proof, proof[0]], root)
    assert not merkle.verify_inclusion(38, 100, hashes[37], proof, root)
    assert not merkle.verify_inclusion(37, 200, hashes[37], proof, root)  # another tree shape
    cproof = merkle.consistency_proof(read, 30, 100)
    old = ref_mth(hashes[:30])
    for position in range(len(cproof)):
        bad = list(cproof)
        bad[position] = bytes(32)
        assert not merkle.verify_consistency(30, 100, old, root, bad)
    assert not merkle.verify_consistency(31, 100, old, root, cproof)
    assert not merkle.verify_consistency(30, 100, root, old, cproof)


def test_frontier_push_reports_completed_subtrees() -> None:
    frontier: list[bytes] = []
    hashes = [merkle.leaf_hash(bytes([i])) for i in range(8)]
    completed = [merkle.frontier_push(frontier, i, h) for i, h in enumerate(hashes)]
    assert [len(c) for c in completed] == [1, 2, 1, 3, 1, 2, 1, 4]
    assert completed[7][-1] == (3, ref_mth(hashes))
    assert frontier == [ref_mth(hashes)]


def test_proof_generation_refuses_out_of_range() -> None:
    read = _reader([merkle.leaf_hash(b"x")])
    with pytest.raises(ValueError):
        merkle.inclusion_proof(read, 1, 1)
    with pytest.raises(ValueError):
        merkle.consistency_proof(read, 0, 1)
