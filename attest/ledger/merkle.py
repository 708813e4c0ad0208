"""RFC 6962 Merkle tree hashing with RFC 9162 inclusion and consistency proofs.

Hand-written against RFC 9162 sections 2.1.1-2.1.4 because the Python packages that exist for
this are prototypes; the algorithms are short and are tested against the transparency-dev test
vectors and a brute-force reference.

Hashing (RFC 6962 section 2.1): ``leaf = SHA-256(0x00 || data)``,
``node = SHA-256(0x01 || left || right)``, and the hash of the empty tree is ``SHA-256("")``.

Proof *generation* never walks the leaves: it asks a :data:`NodeReader` for the hashes of
*perfect* subtrees (``2**level`` leaves starting at ``index * 2**level``), which storage keeps,
so a proof in a log of a million entries costs O(log n) lookups. Any other subtree hash (the
right edge of a tree whose size is not a power of two) is folded from at most ``log2(n)``
perfect subtrees.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "NodeKey",
    "NodeReader",
    "consistency_proof",
    "frontier_push",
    "frontier_root",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "perfect_subtrees",
    "root_from_leaf_hashes",
    "subtree_hash",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

NodeKey = tuple[int, int]
"""``(level, index)`` of a perfect subtree: leaves ``[index * 2**level, (index + 1) * 2**level)``."""

NodeReader = Callable[[Sequence[NodeKey]], Sequence[bytes]]
"""Returns the stored hash of each requested perfect subtree, in the order asked."""


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _largest_power_of_two_below(n: int) -> int:
    """The largest power of two strictly less than ``n`` (``n >= 2``), RFC 9162's ``k``."""
    return 1 << ((n - 1).bit_length() - 1)


# --- compact range ("frontier"): the perfect subtrees along the right edge of a tree ---------


def perfect_subtrees(start: int, end: int) -> list[NodeKey]:
    """The perfect subtrees that tile ``[start, end)`` left to right, largest first.

    ``start`` must be aligned to the largest piece (true for every range RFC 9162 asks for:
    they start at 0 or at a multiple of a power of two at least as large as the range).
    """
    keys: list[NodeKey] = []
    size = end - start
    position = start
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            keys.append((level, position >> level))
            position += 1 << level
    return keys


def _fold_right(hashes: Sequence[bytes]) -> bytes:
    """Hash of a range from its perfect subtrees (largest first): ``H(a, H(b, H(c, d)))``."""
    result = hashes[-1]
    for piece in reversed(hashes[:-1]):
        result = node_hash(piece, result)
    return result


def frontier_root(frontier: Sequence[bytes]) -> bytes:
    """Root of a tree from its frontier (the perfect subtree hashes of its size, largest first)."""
    if not frontier:
        return EMPTY_ROOT
    return _fold_right(frontier)


def frontier_push(
    frontier: list[bytes], size: int, new_leaf_hash: bytes
) -> list[tuple[int, bytes]]:
    """Append one leaf hash to a tree of ``size`` leaves whose frontier is ``frontier``.

    Mutates ``frontier`` in place into the frontier of ``size + 1`` leaves and returns the
    perfect subtrees completed by this leaf as ``(level, hash)`` pairs, level 0 (the leaf)
    first. Their indexes are ``(size + 1) // 2**level - 1``.
    """
    completed = [(0, new_leaf_hash)]
    current = new_leaf_hash
    level = 0
    while size >> level & 1:  # a left sibling of the same height is waiting to be merged
        current = node_hash(frontier.pop(), current)
        level += 1
        completed.append((level, current))
    frontier.append(current)
    return completed


def root_from_leaf_hashes(leaf_hashes: Iterable[bytes]) -> bytes:
    """Merkle tree hash of a sequence of leaf hashes, in one pass and O(log n) memory."""
    frontier: list[bytes] = []
    for size, h in enumerate(leaf_hashes):
        frontier_push(frontier, size, h)
    return frontier_root(frontier)


def subtree_hash(read_nodes: NodeReader, start: int, end: int) -> bytes:
    """``MTH(D[start:end])`` from stored perfect subtrees (O(log n) lookups)."""
    if end <= start:
        return EMPTY_ROOT
    return _fold_right(read_nodes(perfect_subtrees(start, end)))


# --- proof generation (RFC 9162 2.1.3.1 and 2.1.4.1) -----------------------------------------


def _inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The subtree ranges whose hashes form ``PATH(index, D[size])``, in proof order."""
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _largest_power_of_two_below(hi - lo)
        if index < lo + k:  # PATH(m, D[0:k]) : MTH(D[k:n])
            ranges.append((lo + k, hi))
            hi = lo + k
        else:  # PATH(m - k, D[k:n]) : MTH(D[0:k])
            ranges.append((lo, lo + k))
            lo += k
    ranges.reverse()  # the recursion emits the deepest sibling first
    return ranges


def _consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The subtree ranges whose hashes form ``PROOF(old_size, D[new_size])``, in proof order."""
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, new_size
    whole_old_tree_is_a_subtree = True  # SUBPROOF's boolean b
    while old_size != hi:
        k = _largest_power_of_two_below(hi - lo)
        if old_size - lo <= k:  # SUBPROOF(m, D[0:k], b) : MTH(D[k:n])
            ranges.append((lo + k, hi))
            hi = lo + k
        else:  # SUBPROOF(m - k, D[k:n], false) : MTH(D[0:k])
            ranges.append((lo, lo + k))
            lo += k
            whole_old_tree_is_a_subtree = False
    if not whole_old_tree_is_a_subtree:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def _range_hashes(read_nodes: NodeReader, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """Hashes of several ranges with one batched node lookup."""
    pieces = [perfect_subtrees(lo, hi) for lo, hi in ranges]
    wanted = sorted({key for keys in pieces for key in keys})
    found = dict(zip(wanted, read_nodes(wanted), strict=True))
    return [_fold_right([found[key] for key in keys]) for keys in pieces]


def inclusion_proof(read_nodes: NodeReader, index: int, size: int) -> list[bytes]:
    """RFC 9162 inclusion proof of leaf ``index`` in the tree of the first ``size`` leaves."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is not in a tree of {size} leaves")
    return _range_hashes(read_nodes, _inclusion_ranges(index, size))


def consistency_proof(read_nodes: NodeReader, old_size: int, new_size: int) -> list[bytes]:
    """RFC 9162 consistency proof between the trees of ``old_size`` and ``new_size`` leaves.

    Empty when the sizes are equal; defined only for ``0 < old_size <= new_size``.
    """
    if not 0 < old_size <= new_size:
        raise ValueError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size == new_size:
        return []
    return _range_hashes(read_nodes, _consistency_ranges(old_size, new_size))


# --- proof verification (RFC 9162 2.1.3.2 and 2.1.4.2) ---------------------------------------


def _all_hashes(proof: Sequence[bytes]) -> bool:
    return all(isinstance(p, bytes) and len(p) == HASH_SIZE for p in proof)


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> bool:
    """True if ``proof`` shows leaf hash ``leaf`` at ``index`` in the tree ``(size, root)``."""
    if not (0 <= index < size) or len(leaf) != HASH_SIZE or not _all_hashes(proof):
        return False
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and hmac.compare_digest(r, root)


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """True if ``proof`` shows the tree ``(new_size, new_root)`` extends ``(old_size, old_root)``.

    A consistency check from the empty tree proves nothing and is refused (``old_size == 0``);
    equal sizes need an empty proof and equal roots.
    """
    if not 0 < old_size <= new_size:
        return False
    if old_size == new_size:
        return not proof and hmac.compare_digest(old_root, new_root)
    if not proof or not _all_hashes(proof):
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # the old tree is a perfect subtree of the new one
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and hmac.compare_digest(fr, old_root) and hmac.compare_digest(sr, new_root)
