"""``attest ledger serve``, ``attest ledger mirror`` and ``attest ledger verify URL``: the
ledger service and its auditors' clients (attest.ledger.service); ``--ledger URL`` of verify
and certify is in attest.cli.ledger_remote. Click only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from attest.cli.ledger_options import witness_trust_option
from attest.core.text import json_safe, printable_json, safe_text
from attest.errors import EXIT_NEGATIVE, InputError
from attest.ledger.service.limits import ConnectionLimits, connection_budget, raise_fd_limit

if TYPE_CHECKING:
    from attest.ledger.witness.cosignature import WitnessPolicy


def listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise InputError(f"--listen {text!r} is not HOST:PORT", hint="e.g. 127.0.0.1:8080")
    return host.strip("[]"), int(port)


# The distribution (pip name) providing each third-party top-level module ``attest ledger serve``
# imports; every one is in the ``ledger-service`` extra or the core dependencies
# (tests/unit/ledger/service/test_service_dependencies.py checks both).
SERVICE_PACKAGES = {
    "starlette": "starlette",
    "uvicorn": "uvicorn",
    "httptools": "httptools",
    "uvloop": "uvloop",
    "psycopg": "psycopg[binary]",
    "prometheus_client": "prometheus-client",
    "httpx": "httpx",
    "aiohttp": "aiohttp",
    "anyio": "anyio",
}


def missing_module(exc: ModuleNotFoundError) -> InputError:
    """The usage error for a module the service needs but cannot import: names the package
    that provides it and the extra that installs it."""
    top = (exc.name or "").partition(".")[0]
    package = SERVICE_PACKAGES.get(top)
    if package is None:  # not one the service declares: a broken install, say exactly what
        return InputError(
            f"attest ledger serve cannot import {safe_text(exc.name or '?')}",
            hint="reinstall: pip install --force-reinstall 'gradient-attest[ledger-service]'",
        )
    return InputError(
        f"attest ledger serve needs the Python package {package} (module {top}), which is not"
        " installed",
        hint=f"pip install 'gradient-attest[ledger-service]' (it installs {package})",
    )


@click.command("serve")
@click.option(
    "--db",
    "dsn",
    required=True,
    envvar="ATTEST_LEDGER_DB",
    help="PostgreSQL connection string (postgresql://... or key=value), env ATTEST_LEDGER_DB.",
)
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The log's Ed25519 private key (signs checkpoints).",
)
@click.option(
    "--origin",
    required=True,
    help="The log's origin (checkpoint first line), e.g. ledger.example.org/clinical.",
)
@click.option(
    "--listen", default="127.0.0.1:8080", show_default=True, help="HOST:PORT to listen on."
)
@click.option(
    "--clients",
    "clients_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="clients.yaml: who may write which entry types (an empty list: read-only).",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TLS certificate chain (PEM); with --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TLS private key (PEM).",
)
@click.option(
    "--checkpoint-interval",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds between stored checkpoint rows (one is also signed after every batch).",
)
@click.option(
    "--max-batch",
    default=512,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Most entries appended in one transaction.",
)
@click.option(
    "--header-timeout",
    default=ConnectionLimits.header_timeout_s,
    show_default=True,
    type=click.FloatRange(min=0.1, max=3600),
    help="Seconds a connection has to send a request's line and headers (from the connection,"
    " or from its first byte after a keep-alive); then 408 and closed.",
)
@click.option(
    "--body-timeout",
    default=ConnectionLimits.body_timeout_s,
    show_default=True,
    type=click.FloatRange(min=0.1, max=3600),
    help="Seconds a request has to send its whole body once its headers are in; then 408.",
)
@click.option(
    "--keepalive-timeout",
    default=ConnectionLimits.keepalive_timeout_s,
    show_default=True,
    type=click.IntRange(1, 3600),
    help="Seconds an idle keep-alive connection is kept between requests.",
)
@click.option(
    "--max-connections",
    default=ConnectionLimits.max_connections,
    show_default=True,
    type=click.IntRange(2, 1_000_000),
    help="Open connections at most (lowered to fit the file-descriptor limit); at the limit the"
    " connection waiting longest on its client is closed for the new one.",
)
@click.option(
    "--max-requests",
    default=ConnectionLimits.max_requests,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Requests answered at once at most; beyond, 503 UNAVAILABLE (retryable).",
)
@click.option(
    "--witnesses",
    "witnesses_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="witnesses.yaml: the witnesses asked to cosign each checkpoint (URL and key), the"
    " quorum a checkpoint needs before it is published, and how long a write waits for it.",
)
@click.option(
    "--static-dir",
    "static_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write the reads (checkpoint, tiles, entry bundles, clients) as immutable files"
    " in the C2SP tlog-tiles layout into DIR, for a static web server (nginx) to serve:"
    " production reads then never reach PostgreSQL (docs/ledger.md).",
)
def serve(
    dsn: str,
    key_path: Path,
    origin: str,
    listen: str,
    clients_path: Path,
    tls_cert: Path | None,
    tls_key: Path | None,
    checkpoint_interval: float,
    max_batch: int,
    header_timeout: float,
    body_timeout: float,
    keepalive_timeout: int,
    max_connections: int,
    max_requests: int,
    witnesses_path: Path | None,
    static_dir: Path | None,
) -> None:
    """Run the ledger service: C2SP tlog-tiles reads, client-signed writes, on PostgreSQL.

    The database schema is created or migrated at start, and the stored tree is checked
    against every earlier checkpoint of this key before anything is served.
    """
    from attest.certificate.signing import load_private_key
    from attest.ledger.checkpoint import check_origin, verifier_key

    host, port = listen_address(listen)
    if (tls_cert is None) != (tls_key is None):
        raise InputError("--tls-cert and --tls-key go together")
    try:
        from attest.ledger.service.app import ServiceConfig, create_app
        from attest.ledger.service.guard import run_guarded
        from attest.ledger.service.submission import load_clients
        from attest.ledger.witness.client import load_witnessing
    except ModuleNotFoundError as exc:
        raise missing_module(exc) from None
    limits = ConnectionLimits(
        header_timeout, body_timeout, keepalive_timeout, max_connections, max_requests
    ).check()
    fd_soft, fd_hard = raise_fd_limit()
    budget = connection_budget(limits, fd_soft)
    key = load_private_key(key_path)
    config = ServiceConfig(
        dsn=dsn,
        key=key,
        origin=check_origin(origin),
        clients=load_clients(clients_path),
        checkpoint_interval_s=checkpoint_interval,
        max_batch=max_batch,
        witnessing=load_witnessing(witnesses_path) if witnesses_path is not None else None,
        static_dir=static_dir,
    )
    app = create_app(config)
    scheme = "https" if tls_cert else "http"
    click.echo(
        f"ledger {origin}: {scheme}://{host}:{port}/ ({len(config.clients.clients)} clients)",
        err=True,
    )
    click.echo(f"verifier key: {verifier_key(origin, key.public_key)}", err=True)
    lowered = (
        f" (lowered from {max_connections}: {fd_soft} file descriptors)"
        if budget < max_connections
        else ""
    )
    click.echo(
        f"limits: {budget} connections{lowered}, {max_requests} requests at once, headers"
        f" {header_timeout:g}s, body {body_timeout:g}s, keep-alive {keepalive_timeout}s;"
        f" file descriptors {fd_soft}/{fd_hard}",
        err=True,
    )
    run_guarded(
        app,
        host=host,
        port=port,
        limits=limits,
        max_connections=budget,
        ssl_certfile=str(tls_cert) if tls_cert else None,
        ssl_keyfile=str(tls_key) if tls_key else None,
    )


@click.command("mirror")
@click.argument("url")
@click.argument("local", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The log's public key (PEM or note verifier key).",
)
@witness_trust_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def mirror(url: str, local: Path, key_path: Path, trust_path: Path | None, as_json: bool) -> None:
    """Keep a verified local copy (SQLite) of the remote log at URL.

    Fetches the entries the copy lacks from the tiles, checks the copy with them reproduces
    the log's signed checkpoint (with --trust, cosigned by its witness quorum), and only then
    commits them with that checkpoint.
    """
    from attest.cli.ledger_remote import witness_policy
    from attest.ledger.checkpoint import load_checkpoint_key
    from attest.ledger.service.remote_audit import mirror_log

    key, name = load_checkpoint_key(key_path)
    policy = witness_policy(trust_path)
    result = mirror_log(url, local, key, key_name=name, policy=policy)
    if as_json:
        click.echo(printable_json(json_safe(result)))
        return
    click.echo(
        f"mirrored {safe_text(url)} into {local}: {result['added']} new entries, "
        f"{result['tree_size']} in all, checkpoint verified"
    )


def verify_remote(
    ctx: click.Context,
    url: str,
    key_paths: tuple[Path, ...],
    state: Path | None,
    skip_entries: bool,
    as_json: bool,
    *,
    origin: str | None = None,
    policy: WitnessPolicy | None = None,
) -> None:
    """``attest ledger verify URL``: audit the whole remote log from its tiles."""
    from attest.ledger.checkpoint import load_checkpoint_key
    from attest.ledger.service.remote_audit import audit_remote

    if len(key_paths) != 1:
        raise InputError(
            "attest ledger verify URL needs the log's public key: --key LEDGER.pub (once)"
        )
    key, name = load_checkpoint_key(key_paths[0])
    report = audit_remote(
        url,
        key,
        key_name=name,
        state_path=state,
        check_entries=not skip_entries,
        origin=origin,
        policy=policy,
    )
    if as_json:
        click.echo(printable_json(json_safe(report.to_json())))
    else:
        click.echo(report.summary())
        for problem in report.problems[:50]:
            where = f"entry {problem.index}" if problem.index is not None else "log"
            click.echo(f"  [{problem.kind}] {where}: {safe_text(problem.message, 2000)}")
    if not report.ok:
        ctx.exit(EXIT_NEGATIVE)
