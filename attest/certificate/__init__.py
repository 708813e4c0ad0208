"""The certificate: its format facts, the statement models, signing, artifact hashing, schemas.

Import-light on purpose: the verifier imports attest.certificate.statement.format and .signing, so this
__init__ imports nothing."""
