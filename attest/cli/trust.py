"""``attest trust add|revoke|list``: manage the verifier's trust store without editing YAML."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from attest.errors import InputError, KeyError_

_TRUST_OPTION = click.option(
    "--trust",
    "trust_path",
    default="trust.yaml",
    show_default=True,
    envvar="ATTEST_TRUST",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trust store file (env ATTEST_TRUST).",
)


def _time_option(value: str | None, flag: str) -> datetime | None:
    from attest.core.times import parse_timestamp

    if value is None:
        return None
    try:  # parse_timestamp keeps times inside 1970..9000 (ValueError otherwise)
        return parse_timestamp(value)
    except (ValueError, OverflowError) as exc:
        shown = value if len(value) <= 80 else value[:80] + "...(cut)"
        raise InputError(
            f"{flag} {shown!r} is not a timestamp: {str(exc)[:200]}",
            hint="RFC 3339 between 1970 and 9000, e.g. 2027-01-31T00:00:00Z",
        ) from None


@click.group("trust")
def trust() -> None:
    """Manage the verifier's trust store (keys, validity windows, revocations, threshold)."""


@trust.command("add")
@click.argument("pubkey", type=click.Path(dir_okay=False, path_type=Path))
@_TRUST_OPTION
@click.option("--name", default=None, help="A name for the key (default: the file name).")
@click.option("--not-before", default=None, help="Key counts only from this time (RFC 3339).")
@click.option("--not-after", default=None, help="Key counts only until this time (RFC 3339).")
@click.option("--threshold", type=click.IntRange(min=1), default=None, help="Set the threshold.")
def add(
    pubkey: Path,
    trust_path: Path,
    name: str | None,
    not_before: str | None,
    not_after: str | None,
    threshold: int | None,
) -> None:
    """Add a public key (PEM file) to the trust store, creating the store if needed."""
    from dataclasses import replace

    from attest.certificate.signing import MAX_KEY_BYTES
    from attest.core.files import read_bytes_checked
    from attest.verification.trust import (
        add_key,
        empty_trust_store,
        load_trust_store,
        save_trust_store,
    )

    pem = read_bytes_checked(pubkey, what="public key", max_bytes=MAX_KEY_BYTES, error=KeyError_)
    store = (
        load_trust_store(trust_path) if trust_path.exists() else empty_trust_store(str(trust_path))
    )
    store, key = add_key(
        store,
        pem,
        name=name or pubkey.stem,
        not_before=_time_option(not_before, "--not-before"),
        not_after=_time_option(not_after, "--not-after"),
        source=str(pubkey),
    )
    if threshold is not None:
        if threshold > len(store.keys):
            raise InputError(
                f"threshold {threshold} is more than the {len(store.keys)} key(s) listed"
            )
        store = replace(store, threshold=threshold)
    save_trust_store(store, trust_path)
    click.echo(
        f"trusted {key.label()} [{key.algorithm}] in {trust_path} (threshold {store.threshold})"
    )


@trust.command("revoke")
@click.argument("keyid")
@_TRUST_OPTION
@click.option("--reason", default="", help="Why (kept in the store for auditors).")
def revoke(keyid: str, trust_path: Path, reason: str) -> None:
    """Revoke a key by id (full, or a unique prefix of at least 8 hex digits)."""
    from attest.verification.trust import load_trust_store, revoke_key, save_trust_store

    store = load_trust_store(trust_path)
    store = revoke_key(store, keyid, reason=reason)
    save_trust_store(store, trust_path)
    revoked = store.revoked[-1]
    click.echo(f"revoked {revoked.keyid} in {trust_path}")


@trust.command("list")
@_TRUST_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_keys(trust_path: Path, as_json: bool) -> None:
    """List the keys of the trust store and whether each counts now."""
    from attest.core.times import format_timestamp
    from attest.verification.trust import load_trust_store

    store = load_trust_store(trust_path)
    now = datetime.now(timezone.utc)
    rows: list[dict[str, Any]] = []
    for key in store.keys:
        revocation = store.revocation(key.keyid)
        window = key.window_problem(now)
        status = "revoked" if revocation else (f"inactive: {window}" if window else "trusted")
        rows.append(
            {
                "keyid": key.keyid,
                "name": key.name,
                "algorithm": key.algorithm,
                "not_before": format_timestamp(key.not_before) if key.not_before else None,
                "not_after": format_timestamp(key.not_after) if key.not_after else None,
                "status": status,
            }
        )
    listed = {k.keyid for k in store.keys}
    unlisted = [r.keyid for r in store.revoked if r.keyid not in listed]
    if as_json:
        data = {"threshold": store.threshold, "keys": rows, "revoked_unlisted": unlisted}
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"{trust_path}: threshold {store.threshold}, {len(rows)} key(s)")
    for row in rows:
        window = f"{row['not_before'] or '-'} .. {row['not_after'] or '-'}"
        click.echo(
            f"  {row['keyid'][:16]}  {row['name']:<20} {row['algorithm']:<10} {window}  {row['status']}"
        )
    for keyid in unlisted:
        click.echo(f"  {keyid[:16]}  (not listed)          revoked")
