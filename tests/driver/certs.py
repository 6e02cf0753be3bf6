"""Test certificates (``cryptography``): a CA, a server certificate and client certificates.

``make_pki(folder)`` writes PEM files and returns their paths:

- ``ca.pem``: the CA of the server and of the good client;
- ``server.pem`` / ``server.key``: for "localhost", 127.0.0.1 and the extra IPs given;
- ``client.pem`` / ``client.key``: a client certificate signed by the CA;
- ``rogue-ca.pem``, ``rogue.pem`` / ``rogue.key``: another CA and a client it signed.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _builder(subject: str, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
    )


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    cert = (
        _builder(cn, _name(cn), key.public_key())
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
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    cn, ca_cert, ca_key, usage, names=()
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    builder = (
        _builder(cn, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _write(folder: Path, stem: str, cert, key=None) -> None:
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        (folder / f"{stem}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


def make_pki(folder: Path, extra_ips: tuple[str, ...] = ()) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _ca("nnhal test CA")
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in extra_ips]
    server, server_key = _leaf("localhost", ca, ca_key, ExtendedKeyUsageOID.SERVER_AUTH, names)
    client, client_key = _leaf("nnhal client", ca, ca_key, ExtendedKeyUsageOID.CLIENT_AUTH)
    rogue_ca, rogue_ca_key = _ca("rogue CA")
    rogue, rogue_key = _leaf("rogue", rogue_ca, rogue_ca_key, ExtendedKeyUsageOID.CLIENT_AUTH)
    _write(folder, "ca", ca)
    _write(folder, "server", server, server_key)
    _write(folder, "client", client, client_key)
    _write(folder, "rogue-ca", rogue_ca)
    _write(folder, "rogue", rogue, rogue_key)
    return {
        stem: str(folder / name)
        for stem, name in {
            "ca": "ca.pem",
            "server_cert": "server.pem",
            "server_key": "server.key",
            "client_cert": "client.pem",
            "client_key": "client.key",
            "rogue_ca": "rogue-ca.pem",
            "rogue_cert": "rogue.pem",
            "rogue_key": "rogue.key",
        }.items()
    }
