"""``python -m attest`` runs the command line."""

from attest._cli import main

main()
