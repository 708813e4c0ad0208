"""``attest ledger flush URL``: send the events the local spool holds for a ledger service now
(attest.ledger.service.spool), rather than on the next ``verify``/``certify --ledger URL``.
Click only; its own module because it shares the ``--ledger-client`` options of
``attest verify`` (attest.cli.verify), which itself imports attest.cli.ledger_service."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from attest.cli.remote_options import remote_ledger_options
from attest.core.text import json_safe, printable_json, safe_text
from attest.errors import EXIT_NEGATIVE, InputError, LedgerError


@click.command("flush")
@click.argument("url")
@remote_ledger_options
@click.option(
    "--key",
    "log_key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The log's public key (as --ledger-log-key): each answer must prove its event.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def flush(
    ctx: click.Context,
    url: str,
    ledger_client: str | None,
    ledger_client_key: Path | None,
    ledger_log_key: Path | None,
    log_key_path: Path | None,
    as_json: bool,
) -> None:
    """Send the events waiting in the local spool for the ledger service at URL, now.

    Only this client's events (--ledger-client, signed with --ledger-client-key), in the order
    they were queued, each exactly once: an event the service already stored (its answer was
    lost) is answered with the stored entry and is not recorded again. An event leaves the
    spool only when the answer proves it under the log's key (--key or --ledger-log-key): a
    checkpoint signed by that key, an inclusion proof of this event's leaf, and consistency
    with the last checkpoint this spool saw. Without the key, or with an answer that proves
    nothing, the event is "submitted, not proven" and stays pending.

    Exit codes: 0 nothing left waiting; 1 the service could not be reached, or events are
    still waiting, not proven (the rest stays queued, in order); 2 the service refused an
    event (kept in the spool as refused, with its reason) or a usage error.
    """
    from attest.cli.ledger_remote import remote_ledger
    from attest.ledger.service.spool import Spool, default_spool_path

    if log_key_path is not None and ledger_log_key is not None:
        from_env = ctx.get_parameter_source("ledger_log_key") is ParameterSource.ENVIRONMENT
        if from_env:  # --key on the command line wins over $ATTEST_LEDGER_LOG_KEY
            ledger_log_key = None
        elif log_key_path != ledger_log_key:
            raise InputError("give the log's key once: --key or --ledger-log-key, not both")
    target = remote_ledger(url, ledger_client, ledger_client_key, ledger_log_key or log_key_path)
    path = default_spool_path()
    log_key, log_name = target.log_key or (None, None)
    with Spool(path) as spool:
        result = spool.flush(
            url, target.key, log_key=log_key, log_key_name=log_name, client_name=target.client
        )
        elsewhere = {
            where: count
            for (where, client), count in spool.waiting().items()
            if client == target.client and where != url
        }
    report = {
        "url": url,
        "client": target.client,
        "spool": str(path),
        "sent": [{"event": seq, "index": index} for seq, index in result.submitted],
        "not_proven": [{"event": seq, "reason": reason} for seq, reason in result.unproven],
        "refused": [{"event": seq, "reason": reason} for seq, reason in result.refused],
        "pending": result.pending,
        "unreachable": result.unreachable,
        "pending_for_other_urls": elsewhere,
    }
    if as_json:
        click.echo(printable_json(json_safe(report)))
    else:
        _print(url, path, result.submitted, result.refused, result.pending, result.unreachable)
        for seq, reason in result.unproven:
            click.echo(f"event {seq} submitted, not proven: {safe_text(reason, 500)} (pending)")
        for where, count in elsewhere.items():
            click.echo(f"({count} event(s) of this client wait for {safe_text(where)})")
    if result.refused:
        seq, reason = result.refused[-1]
        raise LedgerError(
            f"the ledger service refused event {seq}: {reason}",
            hint="check --ledger-client and --ledger-client-key against the service's clients.yaml",
        )
    if result.pending:
        ctx.exit(EXIT_NEGATIVE)


def _print(
    url: str,
    path: Path,
    sent: list[tuple[int, int]],
    refused: list[tuple[int, str]],
    pending: int,
    unreachable: str | None,
) -> None:
    where = safe_text(url)
    if sent:
        indexes = ", ".join(str(index) for _, index in sent[:20]) + (
            " ..." if len(sent) > 20 else ""
        )
        click.echo(f"sent {len(sent)} event(s) to {where}, each proven: entries {indexes}")
    for seq, reason in refused:
        click.echo(f"refused event {seq}: {safe_text(reason, 500)} (kept in {path} as refused)")
    if unreachable:
        click.echo(f"not sent: {safe_text(unreachable, 500)}")
    click.echo(f"{pending} event(s) still waiting for {where} in {path}")
