"""A key the trust store gives only the collector role signs evidence (attest collect --key),
never certificates: a stolen collector key cannot issue a certificate a server accepts, even
where one trust store serves both (issue 35, docs/threat-model.md)."""

from __future__ import annotations

from pathlib import Path

from _certfactory import make_world, with_roles


def test_a_certificate_signed_by_a_collector_only_key_is_refused_saying_why(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path)
    cert = w.write(w.envelope())  # signed by w.key
    collector_only = with_roles(w.trust, {w.key.keyid: ("collector",)})
    report = w.verify(cert, trust=collector_only)
    assert not report.verified
    assert report.codes == ["UNTRUSTED_KEY"]
    assert any("only the collector role" in note for note in report.notes), report.notes


def test_a_key_with_another_role_besides_collector_still_signs(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    cert = w.write(w.envelope())
    both = with_roles(w.trust, {w.key.keyid: ("collector", "release-engineer")})
    assert w.verify(cert, trust=both).verified
    # and a collector's evidence role does not stop the store's other keys from signing
    mixed = with_roles(w.trust, {w.second.keyid: ("collector",)})
    assert w.verify(cert, trust=mixed).verified
