"""How a client reaches a server that is exposed: TLS, client certificates, a bearer token.

``ClientSecurity`` holds what a client presents (all optional):

- ``root_ca``: PEM of the CA that signed the server's certificate; giving it (or
  ``tls=True`` to use the system's roots) makes the channel TLS;
- ``cert_chain`` / ``private_key``: the client certificate for mutual TLS
  (``nnhal serve --tls-client-ca``);
- ``token``: sent as ``authorization: Bearer <token>`` metadata on every call
  (``nnhal serve --token-file``);
- ``server_name``: the name checked against the server's certificate when it
  differs from the host in the address.

``ClientSecurity.from_env()`` reads ``NNHAL_TOKEN`` (or ``NNHAL_TOKEN_FILE``),
``NNHAL_TLS_CA``, ``NNHAL_TLS_CERT``, ``NNHAL_TLS_KEY`` and
``NNHAL_TLS_SERVER_NAME``; ``nnhal.client.connect`` and ``nnhal.control.Control``
use it when given no ``security``. ``add_arguments`` adds the same as command-line
options (``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--tls-server-name``,
``--token``, ``--token-file``) and ``from_args`` reads them, options winning over
the environment. ``open_channel`` is the one place a client channel is made.

The token travels as ``authorization: Bearer`` metadata of every call made on
the channel (``nnhal._metadata.MetadataChannel``). It is never sent in clear text to a host that
is not loopback: ``open_channel`` refuses (ValueError) rather than leak it.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from nnhal._metadata import with_metadata

AUTH_HEADER = "authorization"

_ENV = {
    "token": "NNHAL_TOKEN",
    "token_file": "NNHAL_TOKEN_FILE",
    "tls_ca": "NNHAL_TLS_CA",
    "tls_cert": "NNHAL_TLS_CERT",
    "tls_key": "NNHAL_TLS_KEY",
    "tls_server_name": "NNHAL_TLS_SERVER_NAME",
}


def split_host(address: str) -> str:
    """The host part of "host:port", "[v6]:port", "dns:///host:port" or a bare host."""
    if address.startswith("dns:"):
        address = address.split("/")[-1]
    if address.startswith("unix:"):
        return "unix"
    if address.startswith("["):
        return address[1:].partition("]")[0]
    if address.count(":") == 1:
        return address.partition(":")[0]
    return address


def is_loopback_host(host: str) -> bool:
    """True when every address ``host`` names is a loopback address (or a unix socket).

    "" and wildcard addresses (0.0.0.0, ::) are not loopback: they listen on every
    interface. A name other than "localhost" is resolved; a name that does not
    resolve is not loopback.
    """
    host = host.strip("[]")
    if host == "unix":
        return True
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses
    )


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


def read_token_file(path: str) -> str:
    """The token in a file: its first non-empty line, without surrounding whitespace."""
    data = _read(path, "token file") or b""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()
    raise ValueError(f"the token file {path} is empty")


@dataclass(frozen=True)
class ClientSecurity:
    """What a client presents to the server (see the module docstring)."""

    root_ca: bytes | None = None
    cert_chain: bytes | None = None
    private_key: bytes | None = None
    token: str | None = None
    server_name: str | None = None
    tls: bool = False

    def __post_init__(self) -> None:
        if (self.cert_chain is None) != (self.private_key is None):
            raise ValueError("a client certificate needs both --tls-cert and --tls-key")
        if self.token is not None and (
            not self.token
            or any(c in self.token for c in "\r\n\0")
            or self.token != self.token.strip()
        ):
            raise ValueError("the token must be one line without surrounding whitespace")

    @property
    def uses_tls(self) -> bool:
        return self.tls or self.root_ca is not None or self.cert_chain is not None

    @classmethod
    def from_files(
        cls,
        *,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        tls_server_name: str | None = None,
    ) -> ClientSecurity:
        if token is None and token_file:
            token = read_token_file(token_file)
        return cls(
            root_ca=_read(tls_ca, "TLS root CA"),
            cert_chain=_read(tls_cert, "TLS client certificate"),
            private_key=_read(tls_key, "TLS client key"),
            token=token or None,
            server_name=tls_server_name or None,
        )

    @classmethod
    def from_env(cls, environ: Any = None) -> ClientSecurity:
        env = os.environ if environ is None else environ
        return cls.from_files(**{k: env.get(v) or None for k, v in _ENV.items()})

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Any = None) -> ClientSecurity:
        """The options of ``add_arguments``; an option not given falls back to its env var."""
        env = os.environ if environ is None else environ
        values = {k: getattr(args, k, None) or env.get(v) or None for k, v in _ENV.items()}
        if getattr(args, "token", None) or getattr(args, "token_file", None):
            # an explicit option replaces the environment's token, whichever form it has
            values["token"] = getattr(args, "token", None)
            values["token_file"] = getattr(args, "token_file", None)
        return cls.from_files(**values)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--tls-ca/--tls-cert/--tls-key/--tls-server-name/--token/--token-file``."""
    g = p.add_argument_group("connection security (for a server started with TLS or a token)")
    g.add_argument("--tls-ca", metavar="FILE", help="PEM CA of the server's certificate: use TLS")
    g.add_argument("--tls-cert", metavar="FILE", help="PEM client certificate (mutual TLS)")
    g.add_argument("--tls-key", metavar="FILE", help="PEM key of --tls-cert")
    g.add_argument(
        "--tls-server-name", metavar="NAME", help="name to check in the server's certificate"
    )
    g.add_argument(
        "--token", metavar="TOKEN", help="bearer token (visible to `ps`: prefer --token-file)"
    )
    g.add_argument("--token-file", metavar="FILE", help="file holding the bearer token")


def open_channel(
    address: str,
    options: Sequence[tuple[str, Any]] = (),
    security: ClientSecurity | None = None,
) -> grpc.Channel:
    """A channel to ``address`` with ``security`` (default: ``ClientSecurity.from_env()``)."""
    if security is None:
        security = ClientSecurity.from_env()
    options = list(options)
    if security.uses_tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=security.root_ca,
            private_key=security.private_key,
            certificate_chain=security.cert_chain,
        )
        if security.server_name:
            options.append(("grpc.ssl_target_name_override", security.server_name))
        channel = grpc.secure_channel(address, credentials, options=options)
    else:
        if security.token and not is_loopback_host(split_host(address)):
            raise ValueError(
                f"refusing to send the bearer token in clear text to {address}: that is not a "
                "loopback address; connect with TLS (--tls-ca FILE)"
            )
        channel = grpc.insecure_channel(address, options=options)
    token = ((AUTH_HEADER, f"Bearer {security.token}"),) if security.token else ()
    return with_metadata(channel, token)
