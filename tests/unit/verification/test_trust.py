"""The trust store: strict loading, atomic saving, add/revoke, validity windows, threshold."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from _certfactory import NOW, make_world, new_key

from attest.certificate.signing import public_key_pem
from attest.errors import ConfigError, InputError
from attest.verification.trust import (
    TrustStore,
    add_key,
    empty_trust_store,
    load_trust_store,
    resolve_keyid,
    revoke_key,
    save_trust_store,
)


def _store_with_two(tmp_path: Path) -> Path:
    store = empty_trust_store("t")
    a, b = new_key(), new_key("ecdsa-p256")
    store, _ = add_key(store, public_key_pem(a.public_key), name="a")
    store, _ = add_key(
        store,
        public_key_pem(b.public_key),
        name="b",
        not_before=NOW - timedelta(days=1),
        not_after=NOW + timedelta(days=1),
    )
    return save_trust_store(store, tmp_path / "trust.yaml")


def test_round_trip_keeps_keys_windows_and_revocations(tmp_path: Path) -> None:
    path = _store_with_two(tmp_path)
    store = load_trust_store(path)
    assert [k.name for k in store.keys] == ["a", "b"]
    assert store.keys[1].not_after == NOW + timedelta(days=1)
    assert store.keys[1].algorithm == "ecdsa-p256"
    revoked = revoke_key(store, store.keys[0].keyid[:10], reason="lost laptop")
    save_trust_store(revoked, path)
    again = load_trust_store(path)
    assert again.is_revoked(store.keys[0].keyid)
    assert again.revocation(store.keys[0].keyid).reason == "lost laptop"  # type: ignore[union-attr]
    assert "-----BEGIN PUBLIC KEY-----\n" in path.read_text()
    assert not list(tmp_path.glob(".trust.yaml.*"))  # no temp file left behind


def test_windows(tmp_path: Path) -> None:
    store = load_trust_store(_store_with_two(tmp_path))
    b = store.keys[1]
    assert b.window_problem(NOW) is None
    assert "until" in (b.window_problem(NOW + timedelta(days=2)) or "")
    assert "from" in (b.window_problem(NOW - timedelta(days=2)) or "")
    assert b.window_problem(NOW + timedelta(days=1, seconds=30), timedelta(seconds=60)) is None


def test_add_refuses_duplicates_and_revoked_keys(tmp_path: Path) -> None:
    key = new_key()
    store, _ = add_key(empty_trust_store("t"), public_key_pem(key.public_key), name="k")
    with pytest.raises(InputError, match="already"):
        add_key(store, public_key_pem(key.public_key), name="again")
    store = revoke_key(store, key.keyid)
    with pytest.raises(InputError, match="revoked"):
        add_key(TrustStore(revoked=store.revoked), public_key_pem(key.public_key), name="k")
    with pytest.raises(InputError, match="already revoked"):
        revoke_key(store, key.keyid)


def test_keyid_prefix_must_be_unique_and_long_enough(tmp_path: Path) -> None:
    store = load_trust_store(_store_with_two(tmp_path))
    full = store.keys[0].keyid
    assert resolve_keyid(store, full[:8]) == full
    with pytest.raises(InputError, match="too short"):
        resolve_keyid(store, full[:4])
    with pytest.raises(InputError, match="match"):
        resolve_keyid(store, "ffffffffff" if not full.startswith("ff") else "0000000000")
    unlisted = "ab" * 32
    assert resolve_keyid(store, unlisted) == unlisted  # a full id may be revoked pre-emptively


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("keys: []\nkeys: []\n", "duplicate key"),
        ("keys: []\nthreshold: 0\n", "threshold"),
        ("keys: []\n", "can never be met"),
        ("keys: [{name: x}]\n", "missing pem"),
        ("keys: [{name: x, pem: nope}]\n", "not a PEM"),
        ("keys: []\nextra: 1\n", "unknown field"),
        ("version: 2\nkeys: []\n", "not supported"),
        ("keys: [\n", "not valid YAML"),
        ("revoked: [{keyid: abc}]\nkeys: []\n", "64 hex"),
        ("- just a list\n", "mapping"),
    ],
)
def test_invalid_stores_name_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "trust.yaml"
    path.write_text(text)
    with pytest.raises((ConfigError, InputError), match=problem):
        load_trust_store(path)


def test_keyid_that_does_not_match_its_pem_is_refused(tmp_path: Path) -> None:
    path = _store_with_two(tmp_path)
    text = path.read_text()
    store = load_trust_store(path)
    path.write_text(text.replace(store.keys[0].keyid, store.keys[1].keyid, 1))
    with pytest.raises(ConfigError, match="does not match its PEM"):
        load_trust_store(path)


def test_missing_store_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_trust_store(tmp_path / "absent.yaml")


def test_threshold_counts_each_key_once_and_only_trusted_keys(tmp_path: Path) -> None:
    from dataclasses import replace

    from _certfactory import sign_raw

    world = make_world(tmp_path)
    two = replace(world.trust, threshold=2)
    both = world.write(sign_raw(world.statement(), [world.key, world.second]), "both.json")
    assert world.verify(both, trust=two).verified
    twice = world.write(sign_raw(world.statement(), [world.key, world.key]), "twice.json")
    assert world.verify(twice, trust=two).codes == ["UNTRUSTED_KEY"]
    extra = world.write(sign_raw(world.statement(), [world.attacker, world.key]), "extra.json")
    assert world.verify(extra).verified  # threshold 1 met by the trusted key
    revoked_second = revoke_key(two, world.second.keyid)
    assert world.verify(both, trust=revoked_second).codes == ["KEY_REVOKED", "UNTRUSTED_KEY"]


def test_a_keys_targets_round_trip_and_bad_lists_are_refused(tmp_path: Path) -> None:
    key = new_key()
    store, added = add_key(
        empty_trust_store("t"), public_key_pem(key.public_key), name="pool",
        roles=("collector",), targets=("cuda:sm_90",),
    )  # fmt: skip
    assert added.may_vouch_for("cuda:sm_90") and not added.may_vouch_for("cpu:x86_64")
    path = save_trust_store(store, tmp_path / "trust.yaml")
    assert "targets:\n  - cuda:sm_90" in path.read_text()
    again = load_trust_store(path)
    assert again.keys[0].targets == ("cuda:sm_90",)
    unbound, _ = add_key(empty_trust_store("t"), public_key_pem(key.public_key), name="any")
    assert unbound.keys[0].may_vouch_for("anything")  # no targets: any target, as before
    text = path.read_text()
    for bad, problem in [
        ("targets: []", "is empty"),
        ("targets: [a, a]", "names a target twice"),
        ("targets: cuda", "list of target names"),
        ("targets: ['']", "non-empty string"),
    ]:
        path.write_text(text.replace("targets:\n  - cuda:sm_90", bad))
        with pytest.raises(ConfigError, match=problem):
            load_trust_store(path)
