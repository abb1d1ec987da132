"""A small CA and role-bearing certificates: mutual TLS on the control plane (docs/security.md).

Every certificate carries its holder's role and name as a SPIFFE-style URI in its subject
alternative names, ``spiffe://radium/<role>/<name>``; the pool reads it from the verified peer
certificate and lets each role call only its own service (:data:`SERVICE_ROLES`). Pool
certificates also carry the DNS name :data:`POOL_NAME`, which every client checks as the TLS
server name: only a pool's certificate can answer as a pool. Keys are ECDSA P-256, written 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from radium.errors import AlreadyExistsError, AuthError, ConfigError, UsageError

__all__ = ["POOL_NAME", "ROLES", "SERVICE_ROLES", "identity", "init", "issue"]

ROLES = ("pool", "acceptor", "agent", "admin")
#: Which roles may call which control-plane service.
SERVICE_ROLES: Mapping[str, frozenset[str]] = {
    "radium.v1.Pool": frozenset({"agent", "admin"}),
    "radium.v1.Acceptors": frozenset({"acceptor"}),
    "radium.v1.Queues": frozenset({"admin"}),
}
POOL_NAME = "radium-pool"
_SCHEME = "spiffe://radium/"
CA_CERT, CA_KEY = "ca.pem", "ca.key"


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def init(directory: Path, days: int = 3650) -> Path:
    """A new CA in ``directory`` (refusing to replace one: every certificate hangs on it)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if (directory / CA_KEY).exists():
        raise AlreadyExistsError(
            f"a CA already exists in {directory}",
            hint="issue certificates with it (radium certs issue), or choose another --dir",
        )
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Radium CA {os.urandom(4).hex()}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _write(directory / CA_KEY, _key_pem(key), 0o600)
    _write(directory / CA_CERT, certificate.public_bytes(serialization.Encoding.PEM), 0o644)
    return directory / CA_CERT


def issue(
    directory: Path,
    role: str,
    name: str,
    hosts: Iterable[str] = (),
    days: int = 365,
    not_before: datetime.datetime | None = None,
) -> tuple[Path, Path]:
    """A certificate for ``name`` in ``role``, signed by the CA in ``directory``:
    (``NAME.pem``, ``NAME.key``). ``hosts``: more DNS names or IP addresses it answers as."""
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r}", hint=f"one of {', '.join(ROLES)}")
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"bad certificate name {name!r}", hint="a host or user name, no '/'")
    try:
        ca_key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), None)
        ca = x509.load_pem_x509_certificate((directory / CA_CERT).read_bytes())
    except FileNotFoundError as exc:
        raise ConfigError(
            f"no CA in {directory}", hint=f"radium certs init --dir {directory}"
        ) from exc
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{directory / CA_KEY} is not a Radium CA key")
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or datetime.datetime.now(datetime.timezone.utc)
    alternatives: list[x509.GeneralName] = [
        x509.UniformResourceIdentifier(_SCHEME + f"{role}/{name}")
    ]
    for host in [*([POOL_NAME] if role == "pool" else []), *hosts]:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alternatives.append(x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(minutes=5))
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, certificate.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert_path, key_path


def identity(pem: bytes) -> tuple[str, str]:
    """(role, name) of a peer certificate the TLS layer has already verified."""
    try:
        certificate = x509.load_pem_x509_certificate(pem)
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (ValueError, x509.ExtensionNotFound) as exc:
        raise AuthError("the peer certificate names no Radium role") from exc
    for uri in names.value.get_values_for_type(x509.UniformResourceIdentifier):
        if uri.startswith(_SCHEME):
            role, _, name = uri[len(_SCHEME) :].partition("/")
            if role in ROLES and name:
                return role, name
    raise AuthError(
        "the peer certificate names no Radium role", hint="radium certs issue ROLE NAME"
    )
