"""The trust store's witnesses and witness_quorum (issue 37): cosigner vkeys parsed and kept
through a save, and every way the section can be wrong refused with a ConfigError naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from _certfactory import new_key

from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, NoteKey
from attest.certificate.signing import public_key_pem
from attest.errors import ConfigError
from attest.verification.trust import load_trust_store, save_trust_store


def _vkey(name: str) -> str:
    return NoteKey(name, new_key().public_key, SIGNATURE_TYPE_COSIGNATURE).text


def _store(tmp_path: Path, tail: str) -> Path:
    pem = "".join(
        "      " + line + "\n" for line in public_key_pem(new_key().public_key).splitlines()
    )
    path = tmp_path / "trust.yaml"
    path.write_text(f"version: 1\nkeys:\n  - name: k\n    pem: |\n{pem}{tail}")
    return path


def test_witnesses_and_quorum_load_and_survive_a_save(tmp_path: Path) -> None:
    one, two = _vkey("w.example/w1"), _vkey("w.example/w2")
    tail = f"witnesses:\n  - {{name: w1, key: '{one}'}}\n  - {{name: w2, key: '{two}'}}\n"
    store = load_trust_store(_store(tmp_path, tail + "witness_quorum: 2\n"))
    assert [w.name for w in store.witnesses] == ["w1", "w2"]
    assert store.witnesses[0].key.text == one and store.witness_quorum == 2
    save_trust_store(store, tmp_path / "again.yaml")
    again = load_trust_store(tmp_path / "again.yaml")
    assert again.witnesses == store.witnesses and again.witness_quorum == 2
    assert load_trust_store(_store(tmp_path, "")).witness_quorum is None


@pytest.mark.parametrize(
    ("tail", "says"),
    [
        ("witnesses:\n  - {name: w1, key: KEY1}\n", "no quorum"),
        ("witnesses:\n  - {name: w1, key: KEY1}\nwitness_quorum: 2\n", "can never be met"),
        ("witnesses:\n  - {name: w1, key: KEY1}\nwitness_quorum: 0\n", ">= 1"),
        ("witnesses:\n  - {name: w1, key: KEY1}\nwitness_quorum: true\n", ">= 1"),
        ("witness_quorum: 1\n", "can never be met"),
        (
            "witnesses:\n  - {name: w1, key: KEY1}\n  - {name: w1, key: KEY2}\nwitness_quorum: 1\n",
            "listed twice",
        ),
        (
            "witnesses:\n  - {name: w1, key: KEY1}\n  - {name: w2, key: KEY1}\nwitness_quorum: 1\n",
            "listed twice",
        ),
        ("witnesses:\n  - {name: w1, key: CHECKPOINTKEY}\nwitness_quorum: 1\n", "type 0x04"),
        ("witnesses:\n  - {name: w1, key: 'w+00+AA=='}\nwitness_quorum: 1\n", "note verifier key"),
        ("witnesses:\n  - {name: w1}\nwitness_quorum: 1\n", "missing key"),
        ("witnesses:\n  - {name: w1, key: KEY1, url: x}\nwitness_quorum: 1\n", "unknown field"),
        ("witnesses: w1\nwitness_quorum: 1\n", "must be a list"),
    ],
)
def test_bad_witness_sections_are_refused(tmp_path: Path, tail: str, says: str) -> None:
    checkpoint_key = NoteKey("w.example/w1", new_key().public_key).text
    tail = tail.replace("KEY1", f"'{_vkey('w.example/w1')}'").replace(
        "KEY2", f"'{_vkey('w.example/w2')}'"
    )
    tail = tail.replace("CHECKPOINTKEY", f"'{checkpoint_key}'")
    with pytest.raises(ConfigError) as caught:
        load_trust_store(_store(tmp_path, tail))
    assert says in caught.value.message, caught.value.message


def test_trust_witness_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from _cli_run import run

    trust = _store(tmp_path, "")
    one, two = _vkey("w.example/w1"), _vkey("w.example/w2")
    assert run(capsys, "trust", "witness", "w1", one, "--trust", trust)[0] == 0
    assert load_trust_store(trust).witness_quorum == 1
    assert run(capsys, "trust", "witness", "w2", two, "--trust", trust, "--quorum", "2")[0] == 0
    store = load_trust_store(trust)
    assert [w.name for w in store.witnesses] == ["w1", "w2"] and store.witness_quorum == 2
    code, _, err = run(capsys, "trust", "witness", "w2", "--remove", "--trust", trust)
    assert code == 2 and "can never be met" in err
    assert run(capsys, "trust", "witness", "w2", "--quorum", "1", "--trust", trust)[0] == 0
    assert run(capsys, "trust", "witness", "w2", "--remove", "--trust", trust)[0] == 0
    code, _, err = run(capsys, "trust", "witness", "w3", "not-a-key", "--trust", trust)
    assert code == 2 and "note verifier key" in err
    assert run(capsys, "trust", "witness", "w1", "--remove", "--trust", trust)[0] == 0
    store = load_trust_store(trust)
    assert store.witnesses == () and store.witness_quorum is None
