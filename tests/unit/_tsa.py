"""Test helper: a real RFC 3161 Time-Stamping Authority (``openssl ts -reply``), with a test CA
and TSA certificate made here with ``cryptography``, optionally behind an HTTP server on
127.0.0.1 (RFC 3161 §3.4: POST application/timestamp-query, answer application/timestamp-reply).
"""

from __future__ import annotations

import contextlib
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="needs the openssl command")

_CONFIG = """\
[ tsa ]
default_tsa = tsa_config1
[ tsa_config1 ]
dir = {dir}
serial = {dir}/tsaserial
crypto_device = builtin
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


@dataclass
class TestTSA:
    """A CA root (``root_pem``, what a trust store lists) and an openssl TSA signing under it."""

    __test__ = False  # not a pytest class
    folder: Path
    root_pem: str

    def stamp(self, query: bytes) -> bytes:
        """The DER TimeStampResp of ``openssl ts -reply`` for a DER TimeStampReq."""
        assert OPENSSL is not None
        query_path = self.folder / "query.tsq"
        reply_path = self.folder / "reply.tsr"
        query_path.write_bytes(query)
        command = [OPENSSL, "ts", "-reply", "-config", str(self.folder / "tsa.cnf")]
        command += ["-queryfile", str(query_path), "-out", str(reply_path)]
        command += ["-signer", str(self.folder / "tsa.pem"), "-inkey", str(self.folder / "tsa.key")]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
        return reply_path.read_bytes()

    def stamp_message(self, message: bytes) -> bytes:
        """A token over ``sha256(message)`` (what ``attest`` asks a TSA for)."""
        from rfc3161_client import HashAlgorithm, TimestampRequestBuilder

        request = (
            TimestampRequestBuilder()
            .data(message)
            .hash_algorithm(HashAlgorithm.SHA256)
            .cert_request(cert_request=True)
            .build()
        )
        return self.stamp(request.as_bytes())


def make_tsa(folder: Path, *, name: str = "Test TSA", valid: timedelta | None = None) -> TestTSA:
    """A root CA and a TSA certificate (critical EKU timeStamping) under ``folder``.
    ``valid``: the TSA certificate's validity ends this long from now (negative: expired)."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    root = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{name} Root"))
        .issuer_name(_name(f"{name} Root"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=3650))
        .not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    tsa_key = ec.generate_private_key(ec.SECP256R1())
    end = now + (valid if valid is not None else timedelta(days=365))
    tsa = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(root.subject)
        .public_key(tsa_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(min(end - timedelta(days=30), now - timedelta(days=1)))
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    (folder / "tsa.pem").write_text(_pem(tsa))
    (folder / "tsa.key").write_bytes(
        tsa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (folder / "tsaserial").write_text("01\n")
    (folder / "tsa.cnf").write_text(_CONFIG.format(dir=folder))
    return TestTSA(folder, _pem(root))


@contextlib.contextmanager
def serve(tsa: TestTSA) -> Iterator[str]:
    """An RFC 3161 HTTP endpoint on 127.0.0.1 for ``tsa``; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            query = self.rfile.read(length)
            if self.headers.get("Content-Type") != "application/timestamp-query":
                self.send_error(415)
                return
            reply = tsa.stamp(query)
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tsa"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
