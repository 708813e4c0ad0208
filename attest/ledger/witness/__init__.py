"""A C2SP tlog-witness for ledger logs (``attest ledger witness``)."""
