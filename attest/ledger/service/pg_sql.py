"""The SQL of the PostgreSQL backend (:mod:`attest.ledger.service.postgres`): the schema's
migrations, the writer lock's key and the two statements a batch of writes costs."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SUBMIT_STATE", "SUBMIT_WRITE", "WRITER_LOCK"]

SCHEMA_VERSION = 2
WRITER_LOCK = 0x6772_6164_6174_7374  # "gradatst": pg_advisory_xact_lock key of the writer
_LEVEL_MASK = (1 << 6) - 1
APPEND_ONLY = ("ledger_leaves", "ledger_nodes", "ledger_checkpoints", "ledger_submissions")
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE ledger_meta (key text PRIMARY KEY, value text NOT NULL)",
        "CREATE TABLE ledger_leaves (idx bigint PRIMARY KEY CHECK (idx >= 0),"
        " data bytea NOT NULL, leaf_hash bytea NOT NULL)",
        "CREATE TABLE ledger_nodes (key bigint PRIMARY KEY, hash bytea NOT NULL)",
        "CREATE TABLE ledger_checkpoints (id bigserial PRIMARY KEY, size bigint NOT NULL,"
        " root bytea NOT NULL, origin text NOT NULL, note text NOT NULL, signed_at text NOT NULL)",
        "CREATE INDEX ledger_checkpoints_size ON ledger_checkpoints (size)",  # the signed floor
        "CREATE TABLE ledger_submissions (client text NOT NULL, nonce text NOT NULL,"
        " idx bigint NOT NULL, leaf_hash bytea NOT NULL, PRIMARY KEY (client, nonce))",
        """CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'gradient-attest ledger: % on % refused: the table is append-only',
            TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
        END $$""",
        *(
            f"CREATE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {t}"
            " FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change()"
            for t in APPEND_ONLY
        ),
    ],
    # the published clients documents (attest.ledger.service.clients_doc), one row a version
    2: [
        "CREATE TABLE ledger_clients (version bigint PRIMARY KEY CHECK (version >= 1),"
        " document bytea NOT NULL, signature text NOT NULL)",
        "CREATE TRIGGER ledger_clients_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON"
        " ledger_clients FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change()",
    ],
}


# PostgresStorage.submit: what a batch needs to know, in one statement (stored nonces among the
# batch's as JSON [client, nonce, idx, leaf hash hex], the tree size - 1, the checkpoint rows'
# largest size, the meta copy of the last signed note) ...
SUBMIT_STATE = """
SELECT (SELECT max(idx) FROM ledger_leaves),
       (SELECT coalesce(max(size), 0) FROM ledger_checkpoints),
       (SELECT value FROM ledger_meta WHERE key = %(meta)s),
       (SELECT json_agg(json_build_array(s.client, s.nonce, s.idx, encode(s.leaf_hash, 'hex')))
          FROM ledger_submissions s
          JOIN unnest(%(clients)b::text[], %(nonces)b::text[]) AS q(client, nonce)
            ON s.client = q.client AND s.nonce = q.nonce)
"""
# ... and everything it writes in another: leaves, the nodes they complete, the nonces and the
# note of the new tree (data-modifying CTEs run once each, to completion, in this statement).
# The arrays go in PostgreSQL's binary format (%b): no per-element text escaping.
SUBMIT_WRITE = """
WITH leaves AS (
  INSERT INTO ledger_leaves (idx, data, leaf_hash)
  SELECT * FROM unnest(%b::bigint[], %b::bytea[], %b::bytea[])
), nodes AS (
  INSERT INTO ledger_nodes (key, hash) SELECT * FROM unnest(%b::bigint[], %b::bytea[])
), nonces AS (
  INSERT INTO ledger_submissions (client, nonce, idx, leaf_hash)
  SELECT * FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::bytea[])
)
INSERT INTO ledger_meta (key, value) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
