"""``python -m attest`` runs the command line."""

from attest.cli import main

main()
