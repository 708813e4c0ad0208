"""The ledger as a service for a fleet: ``attest ledger serve`` (Starlette on uvicorn) on
PostgreSQL (psycopg 3), with the C2SP tlog-tiles read API, client-signed writes, a single
batching sequencer, ``/healthz`` and OpenMetrics ``/metrics``; and its clients (httpx):
remote audit, mirror, submission with an offline spool. See docs/ledger.md, *The ledger
service*. Needs the ``ledger-service`` extra; nothing here is imported by the SQLite ledger.

- :mod:`.postgres`: :class:`PostgresStorage`, the storage contract on PostgreSQL;
- :mod:`.tiles`: tile paths and entry bundles; :mod:`.submission`: signed writes, clients.yaml;
- :mod:`.sequencer`, :mod:`.metrics`, :mod:`.app`: the service;
- :mod:`.limits`, :mod:`.guard`: slow/idle-client timeouts, connection and request limits;
- :mod:`.client`, :mod:`.remote_audit`, :mod:`.spool`: the clients.
"""
