"""``attest trust add|revoke|list``: manage the verifier's trust store without editing YAML."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from attest.cli.output import echo_json
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
@click.option("--role", "roles", multiple=True, help="A role of the key (repeatable).")
@click.option(
    "--target",
    "targets",
    multiple=True,
    help="A collector key: the only hardware target whose evidence it may sign (repeatable; "
    "default: any).",
)
def add(
    pubkey: Path,
    trust_path: Path,
    name: str | None,
    not_before: str | None,
    not_after: str | None,
    threshold: int | None,
    roles: tuple[str, ...],
    targets: tuple[str, ...],
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
        roles=_role_names(roles),
        targets=_role_names(targets, "target"),
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
@click.option(
    "--at",
    "at_text",
    default=None,
    help="From when the key is revoked (RFC 3339; default now): for a compromised key, the "
    "compromise date. Signatures timestamped before it still count.",
)
def revoke(keyid: str, trust_path: Path, reason: str, at_text: str | None) -> None:
    """Revoke a key by id (full, or a unique prefix of at least 8 hex digits)."""
    from attest.verification.trust import load_trust_store, revoke_key, save_trust_store

    store = load_trust_store(trust_path)
    store = revoke_key(store, keyid, reason=reason, at=_time_option(at_text, "--at"))
    save_trust_store(store, trust_path)
    revoked = store.revoked[-1]
    click.echo(f"revoked {revoked.keyid} in {trust_path}")


def _role_names(roles: tuple[str, ...], what: str = "role") -> tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(r.strip() for r in roles))
    if any(not r for r in cleaned):
        raise InputError(f"a {what} name must not be empty")
    return cleaned


@trust.command("role")
@click.argument("keyid")
@_TRUST_OPTION
@click.option("--add", "added", multiple=True, help="Give the key this role (repeatable).")
@click.option("--remove", "removed", multiple=True, help="Take this role away (repeatable).")
def role(keyid: str, trust_path: Path, added: tuple[str, ...], removed: tuple[str, ...]) -> None:
    """Give a key roles or take them away (roles meet the store's requirements)."""
    from dataclasses import replace

    from attest.verification.trust import load_trust_store, resolve_keyid, save_trust_store

    store = load_trust_store(trust_path)
    full = resolve_keyid(store, keyid)
    key = store.key(full)
    if key is None:
        raise InputError(f"key {full[:16]} is not listed in {trust_path}")
    roles = tuple(r for r in _role_names((*key.roles, *added)) if r not in set(removed))
    keys = tuple(replace(k, roles=roles) if k.keyid == full else k for k in store.keys)
    save_trust_store(replace(store, keys=keys), trust_path)
    click.echo(f"{key.label()}: roles {', '.join(roles) or '(none)'}")


@trust.command("targets")
@click.argument("keyid")
@_TRUST_OPTION
@click.option("--add", "added", multiple=True, help="Let the key sign this target (repeatable).")
@click.option("--remove", "removed", multiple=True, help="Take this target away (repeatable).")
def targets_command(
    keyid: str, trust_path: Path, added: tuple[str, ...], removed: tuple[str, ...]
) -> None:
    """Bind a collector key to the hardware targets whose evidence it may sign."""
    from dataclasses import replace

    from attest.verification.trust import load_trust_store, resolve_keyid, save_trust_store

    store = load_trust_store(trust_path)
    full = resolve_keyid(store, keyid)
    key = store.key(full)
    if key is None:
        raise InputError(f"key {full[:16]} is not listed in {trust_path}")
    gone = set(_role_names(removed, "target"))
    names = tuple(t for t in _role_names((*key.targets, *added), "target") if t not in gone)
    if key.targets and not names:
        raise InputError(
            f"removing {', '.join(sorted(gone))} would leave {key.label()} bound to no target, "
            "which the store reads as any target",
            hint="to stop trusting the key, attest trust revoke KEYID (or attest trust role "
            "--remove collector)",
        )
    keys = tuple(replace(k, targets=names) if k.keyid == full else k for k in store.keys)
    save_trust_store(replace(store, keys=keys), trust_path)
    click.echo(f"{key.label()}: targets {', '.join(names) or '(any)'}")


@trust.command("require")
@_TRUST_OPTION
@click.option("--role", "role_name", required=True, help="The role whose keys must sign.")
@click.option(
    "--meaning",
    required=True,
    type=click.Choice(["authorship", "review", "approval", "responsibility"]),
    help="The meaning they must sign with.",
)
@click.option(
    "--count",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="How many distinct keys (0 removes the requirement).",
)
def require(trust_path: Path, role_name: str, meaning: str, count: int) -> None:
    """Require COUNT distinct keys of ROLE to sign with MEANING (SIGNATURES_INSUFFICIENT
    otherwise)."""
    from dataclasses import replace

    from attest.verification.trust import Requirement, load_trust_store, save_trust_store

    store = load_trust_store(trust_path)
    (name,) = _role_names((role_name,))
    kept = tuple(r for r in store.requirements if (r.role, r.meaning) != (name, meaning))
    if count:
        kept = (*kept, Requirement(name, meaning, count))
    save_trust_store(replace(store, requirements=kept), trust_path)
    click.echo(f"{trust_path}: requires {'; '.join(r.label() for r in kept) or 'no role'}")


@trust.command("revokers")
@_TRUST_OPTION
@click.option("--role", "roles", multiple=True, help="A role allowed to revoke certificates.")
@click.option("--any", "anyone", is_flag=True, help="Any trusted key may revoke (the default).")
def revokers(trust_path: Path, roles: tuple[str, ...], anyone: bool) -> None:
    """Say which roles may revoke certificates (attest revoke)."""
    from dataclasses import replace

    from attest.verification.trust import load_trust_store, save_trust_store

    if anyone == bool(roles):
        raise InputError("give either --role ROLE (repeatable) or --any")
    store = replace(
        load_trust_store(trust_path), revocation_roles=None if anyone else _role_names(roles)
    )
    save_trust_store(store, trust_path)
    shown = "any trusted key" if anyone else ", ".join(store.revocation_roles or ())
    click.echo(f"{trust_path}: certificates may be revoked by {shown}")


@trust.command("witness")
@click.argument("name")
@click.argument("vkey", required=False)
@_TRUST_OPTION
@click.option(
    "--quorum",
    type=click.IntRange(min=0),
    default=None,
    help="Set witness_quorum: how many listed witnesses must cosign a ledger checkpoint"
    " (0 removes the requirement).",
)
@click.option("--remove", is_flag=True, help="Remove the witness NAME.")
def witness(
    name: str, vkey: str | None, trust_path: Path, quorum: int | None, remove: bool
) -> None:
    """Trust the ledger witness NAME with its cosigner key VKEY (printed by attest ledger
    witness key), or --remove it; --quorum sets how many must cosign a log checkpoint."""
    from dataclasses import replace

    from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, parse_note_key
    from attest.verification.trust import TrustedWitness, load_trust_store, save_trust_store

    store = load_trust_store(trust_path)
    others = tuple(w for w in store.witnesses if w.name != name)
    if remove:
        if vkey is not None or len(others) == len(store.witnesses):
            raise InputError(f"give only the NAME of a listed witness to --remove ({name!r})")
        witnesses = others
    elif vkey is None:
        witnesses = store.witnesses
        if len(others) == len(witnesses):
            raise InputError(f"witness {name!r} is not listed: give its VKEY to add it")
    else:
        witnesses = (
            *others,
            TrustedWitness(name, parse_note_key(vkey, SIGNATURE_TYPE_COSIGNATURE)),
        )
    if quorum is not None:
        wanted = quorum or None
    else:  # unchanged; the first witness added makes it 1; none left, none needed
        wanted = (store.witness_quorum or 1) if witnesses else None
    if witnesses and wanted is None:
        raise InputError(
            "a trust store that lists witnesses needs a quorum >= 1; remove them first"
        )
    if wanted is not None and wanted > len(witnesses):
        raise InputError(f"--quorum {wanted} can never be met with {len(witnesses)} witness(es)")
    save_trust_store(replace(store, witnesses=witnesses, witness_quorum=wanted), trust_path)
    listed = ", ".join(w.name for w in witnesses) or "none"
    click.echo(f"{trust_path}: witnesses {listed}; quorum {wanted or 'none'}")


@trust.command("tsa")
@click.argument("root", type=click.Path(dir_okay=False, path_type=Path))
@_TRUST_OPTION
@click.option("--name", required=True, help="A name for the timestamp authority.")
def tsa(root: Path, trust_path: Path, name: str) -> None:
    """Trust RFC 3161 tokens whose TSA certificate chains to ROOT (a PEM certificate)."""
    from dataclasses import replace

    from attest.core.files import read_text_checked
    from attest.verification.trust import (
        TimestampAuthority,
        empty_trust_store,
        load_trust_store,
        save_trust_store,
    )

    pem = read_text_checked(root, what="TSA root certificate", max_bytes=256 * 1024)
    store = (
        load_trust_store(trust_path) if trust_path.exists() else empty_trust_store(str(trust_path))
    )
    if any(t.name == name for t in store.timestamp_authorities):
        raise InputError(f"a timestamp authority named {name!r} is already trusted")
    from cryptography import x509

    try:
        x509.load_pem_x509_certificate(pem.encode("ascii", "replace"))
    except ValueError:
        raise InputError(f"{root} is not a PEM X.509 certificate") from None
    added = (*store.timestamp_authorities, TimestampAuthority(name, pem))
    save_trust_store(replace(store, timestamp_authorities=added), trust_path)
    click.echo(f"trusted timestamp authority {name} in {trust_path}")


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
                "roles": list(key.roles),
                "targets": list(key.targets),
                "status": status,
            }
        )
    listed = {k.keyid for k in store.keys}
    unlisted = [r.keyid for r in store.revoked if r.keyid not in listed]
    if as_json:
        data = {
            "threshold": store.threshold,
            "keys": rows,
            "revoked_unlisted": unlisted,
            "requirements": [r.label() for r in store.requirements],
            "timestamp_authorities": [t.name for t in store.timestamp_authorities],
        }
        echo_json(data)
        return
    click.echo(f"{trust_path}: threshold {store.threshold}, {len(rows)} key(s)")
    for row in rows:
        window = f"{row['not_before'] or '-'} .. {row['not_after'] or '-'}"
        click.echo(
            f"  {row['keyid'][:16]}  {row['name']:<20} {row['algorithm']:<10} {window}  {row['status']}"
        )
        if row["roles"]:
            click.echo(f"  {'':16}  roles: {', '.join(row['roles'])}")
        if row["targets"]:
            click.echo(f"  {'':16}  evidence only for targets: {', '.join(row['targets'])}")
    for keyid in unlisted:
        click.echo(f"  {keyid[:16]}  (not listed)          revoked")
    for need in store.requirements:
        click.echo(f"  requires: {need.label()}")
    for authority in store.timestamp_authorities:
        click.echo(f"  timestamp authority: {authority.name}")
