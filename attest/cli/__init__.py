"""The ``attest`` command line: click commands only (parse, call the library, print).

Subcommands live in one module each under ``attest.cli`` and are imported lazily, only when
invoked, so ``attest verify --help`` never pays for torch. :func:`main` is the one place that
maps :class:`attest.errors.AttestError` to exit codes; no traceback reaches a user
(set ``ATTEST_DEBUG=1`` to see one).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

import click

from attest.core.text import check_path_text, safe_text
from attest.errors import EXIT_BAD_INPUT, AttestError

# command name -> "module:attribute" (module relative to attest.cli)
_COMMANDS: dict[str, tuple[str, str]] = {
    "keygen": ("keys", "keygen"),
    "sign": ("keys", "sign"),
    "cosign": ("cosign", "cosign"),
    "revoke": ("cosign", "revoke"),
    "archive": ("archive", "archive"),
    "verify-archive": ("archive", "verify_archive"),
    "trust": ("trust", "trust"),
    "verify": ("verify", "verify"),
    "inspect": ("verify", "inspect"),
    "collect": ("collect", "collect"),
    "evaluate": ("evaluate", "evaluate"),
    "certify": ("certify", "certify"),
    "ledger": ("ledger", "ledger"),
    "report": ("report", "report"),
    "diff": ("report", "diff"),
    "metrics": ("report", "metrics"),
    "training": ("training", "training"),
    "export": ("export", "export"),
}
_HELP: dict[str, str] = {
    "export": "Write a certificate as a Sigstore bundle, in-toto test result or CycloneDX BOM.",
    "keygen": "Create a signing key pair (encrypted PKCS#8, mode 0600).",
    "sign": "Sign an in-toto statement into a DSSE certificate (low-level).",
    "cosign": "Add a signature (name, role, meaning) to a certificate, later.",
    "revoke": "Withdraw one certificate with a signed revocation statement.",
    "archive": "Pack a certificate and its evidence into a verifiable audit archive.",
    "verify-archive": "Reproduce an archived verdict offline, proven against your trust store.",
    "trust": "Manage the verifier's trust store (add, revoke, list keys).",
    "verify": "Verify a certificate offline against a trust store and artifacts.",
    "inspect": "Print what a certificate says (NOT verified).",
    "collect": "Profile a model and run every check; write evidence.json.",
    "evaluate": "Hold evidence against a policy; write findings.json.",
    "certify": "Collect, evaluate and, on pass, sign gradient_certificate.json.",
    "ledger": "The tamper-evident audit ledger.",
    "report": "Write a self-contained HTML report.",
    "diff": "Compare two certificates or evidence files of one model line.",
    "metrics": "Print key figures in OpenMetrics text format.",
    "training": "Summarise and report a training log (attest.TrainingMonitor).",
}


class _LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use (click's documented pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target
        try:
            module = importlib.import_module(f"attest.cli.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("attest.cli"):
                return None  # command not built yet
            raise
        command = getattr(module, attr, None)
        return command if isinstance(command, click.Command) else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help without importing every command module (keeps --help fast and torch-free).
        rows = [(name, _HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gradient-attest", prog_name="attest")
def cli() -> None:
    """gradient-attest: certify the gradients of trained PyTorch models.

    Exit codes: 0 success, 1 negative verdict (policy failed, certificate rejected),
    2 bad input or usage.
    """


def _never_fail_on_encoding() -> None:
    """Text that cannot be encoded for the terminal or pipe (a lone surrogate from a file
    name that is not UTF-8, say) is written as backslash escapes instead of raising: output
    must never be the thing that crashes a command. The commands escape untrusted text
    themselves (:mod:`attest.core.text`); this is the net below them."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(Exception):
                reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``attest`` command; the one place errors become exit codes."""
    debug = os.environ.get("ATTEST_DEBUG") == "1"
    _never_fail_on_encoding()
    for arg in sys.argv[1:] if argv is None else argv:
        problem = check_path_text(str(arg), "argument")
        if problem is not None:  # click's path checks would raise on it (os.stat)
            click.echo(f"error: {problem}\n  hint: check the command line", err=True)
            sys.exit(EXIT_BAD_INPUT)
    try:
        rv = cli.main(args=argv, prog_name="attest", standalone_mode=False)
    except AttestError as exc:
        # Messages quote paths and values from files: printed one line each, escaped.
        hint = f"\n  hint: {safe_text(exc.hint, 2000)}" if exc.hint else ""
        click.echo(f"error: {safe_text(exc.message, 4000)}{hint}", err=True)
        if debug:
            raise
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT if exc.exit_code != 0 else 0)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # last resort: never a traceback for a user
        if debug:
            raise
        click.echo(
            f"internal error: {type(exc).__name__}: {safe_text(exc, 2000)}\n"
            "  hint: this is a bug in gradient-attest; rerun with ATTEST_DEBUG=1 and report the traceback",
            err=True,
        )
        sys.exit(3)
    sys.exit(rv if isinstance(rv, int) else 0)
