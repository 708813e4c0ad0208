"""``attest keygen`` and ``attest sign``: signing keys and the low-level signing path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from attest.cli.cosign import identity, signer_options
from attest.errors import InputError

_ALGORITHMS = ("ed25519", "ecdsa-p256")


def _new_passphrase() -> bytes:
    """The passphrase for a new key: ``ATTEST_KEY_PASSPHRASE`` or a confirmed prompt."""
    from attest.certificate.signing import PASSPHRASE_ENV

    env = os.environ.get(PASSPHRASE_ENV)
    if env is not None:
        if not env:
            raise InputError(f"{PASSPHRASE_ENV} is set but empty", hint="set a real passphrase")
        return env.encode("utf-8")
    if not sys.stdin.isatty():
        raise InputError(
            "no passphrase for the new key",
            hint=f"set {PASSPHRASE_ENV}, run on a terminal to be prompted, "
            "or pass --unencrypted for a throw-away test key",
        )
    text = click.prompt("Passphrase for the new key", hide_input=True, confirmation_prompt=True)
    if not text:
        raise InputError("an empty passphrase does not protect a key")
    return str(text).encode("utf-8")


@click.command("keygen")
@click.option(
    "--out",
    "out",
    required=True,
    metavar="DIR/NAME",
    help="Writes DIR/NAME.key (private, mode 0600) and DIR/NAME.pub.",
)
@click.option(
    "--algorithm",
    type=click.Choice(_ALGORITHMS),
    default="ed25519",
    show_default=True,
    help="Signature algorithm.",
)
@click.option(
    "--unencrypted",
    is_flag=True,
    help="Store the private key without a passphrase (tests and demos only).",
)
def keygen(out: str, algorithm: str, unencrypted: bool) -> None:
    """Create a signing key pair.

    The private key is encrypted PKCS#8 PEM; its passphrase comes from ATTEST_KEY_PASSPHRASE
    or a prompt, never from a command-line value. Existing files are never overwritten.
    """
    from attest.certificate.signing import generate_keypair

    passphrase = None if unencrypted else _new_passphrase()
    key_path, pub_path, keyid = generate_keypair(
        out,
        algorithm="ecdsa-p256" if algorithm == "ecdsa-p256" else "ed25519",
        passphrase=passphrase,
    )
    click.echo(f"private key: {key_path}{' (UNENCRYPTED)' if unencrypted else ''}")
    click.echo(f"public key:  {pub_path}")
    click.echo(f"key id:      {keyid}")
    click.echo(f"next: attest trust add {pub_path} --trust trust.yaml --name NAME")


@click.command("sign")
@click.argument("statement", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "keys",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Private key file (repeat for several signatures).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the certificate.",
)
@signer_options(default_meaning="authorship")
def sign(
    statement: Path,
    keys: tuple[Path, ...],
    output: Path,
    signer_name: str | None,
    signer_role: str,
    meaning: str,
    comment: str,
    tsa: str | None,
) -> None:
    """Sign an in-toto statement (JSON) into a DSSE certificate.

    The statement is validated against the certificate schema first; the signed bytes are its
    RFC 8785 canonical form. Every signature states the same signer options; to sign as
    several people, sign with one key and add the others with `attest cosign`. Most users want
    `attest certify` instead.
    """
    from attest.certificate.signing import load_private_key
    from attest.certificate.statement import Statement, sign_statement, write_certificate
    from attest.certificate.timestamp import timestamper
    from attest.core.io import read_json_file

    data = read_json_file(statement, what="statement")
    parsed = Statement.from_json_dict(data, source=f"statement {statement}")
    loaded = [load_private_key(k) for k in keys]
    if len({k.keyid for k in loaded}) != len(loaded):
        raise InputError("the same key was given twice", hint="each key counts once")
    who = identity(signer_name, signer_role, meaning, comment)
    envelope = sign_statement(
        parsed, loaded, signers=[who] * len(loaded), timestamper=timestamper(tsa)
    )
    write_certificate(output, envelope)
    predicate = parsed.predicate
    click.echo(
        f"signed {predicate.model.name} {predicate.model.version} "
        f"(certificate {predicate.certificate_id}) with {len(loaded)} key(s): {output}"
    )
