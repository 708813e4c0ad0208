"""The evidence file: what collection measured, as plain data (attest.evidence.model.model), and the attribution codec."""
