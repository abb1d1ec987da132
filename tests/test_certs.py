"""`radium certs`: a CA, role-bearing certificates, and the checks the pool makes with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from radium import certs, rpc, rpc_guard
from radium.config import from_dict
from radium.errors import (
    AlreadyExistsError,
    AuthError,
    ConfigError,
    PermissionDeniedError,
    UsageError,
)


def test_issued_certificates_carry_role_and_name(tmp_path: Path) -> None:
    certs.init(tmp_path)
    assert (tmp_path / certs.CA_KEY).stat().st_mode & 0o777 == 0o600
    cert, key = certs.issue(tmp_path, "acceptor", "gpu-7", ["10.0.0.7", "gpu-7.example"])
    assert key.stat().st_mode & 0o777 == 0o600
    assert certs.identity(cert.read_bytes()) == ("acceptor", "gpu-7")
    names = x509.load_pem_x509_certificate(cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert names.value.get_values_for_type(x509.DNSName) == ["gpu-7.example"]
    assert certs.POOL_NAME not in names.value.get_values_for_type(x509.DNSName)
    pool, _ = certs.issue(tmp_path, "pool", "p")
    pool_names = x509.load_pem_x509_certificate(pool.read_bytes()).extensions
    dns = pool_names.get_extension_for_class(x509.SubjectAlternativeName).value
    assert dns.get_values_for_type(x509.DNSName) == [certs.POOL_NAME]


def test_mistakes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no CA in"):
        certs.issue(tmp_path, "agent", "n")
    certs.init(tmp_path)
    with pytest.raises(AlreadyExistsError):
        certs.init(tmp_path)
    with pytest.raises(UsageError, match="unknown role"):
        certs.issue(tmp_path, "root", "n")
    with pytest.raises(UsageError, match="bad certificate name"):
        certs.issue(tmp_path, "agent", "../ca")
    with pytest.raises(AuthError, match="names no Radium role"):
        certs.identity((tmp_path / certs.CA_CERT).read_bytes())  # the CA's own: no role


class Context:
    """The parts of a grpc servicer context the checks read."""

    def __init__(self, pem: bytes = b"", token: str = "") -> None:
        self.pem, self.token = pem, token

    def auth_context(self) -> dict[str, Any]:
        return {"x509_pem_cert": [self.pem]} if self.pem else {}

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return rpc.metadata(self.token)


def test_role_check_lets_each_role_call_only_its_service(tmp_path: Path) -> None:
    certs.init(tmp_path)
    check = rpc_guard.role_check(certs.SERVICE_ROLES)
    agent = Context(certs.issue(tmp_path, "agent", "node-1")[0].read_bytes())
    acceptor = Context(certs.issue(tmp_path, "acceptor", "gpu-1")[0].read_bytes())
    assert check("/radium.v1.Pool/Allocate", agent) is None
    assert check("/radium.v1.Acceptors/Register", acceptor) is None
    refused = check("/radium.v1.Acceptors/Register", agent)
    assert isinstance(refused, PermissionDeniedError)
    assert "an agent certificate (node-1) may not call it" in refused.message
    assert isinstance(check("/radium.v1.Pool/Allocate", acceptor), PermissionDeniedError)
    assert isinstance(check("/radium.v1.Pool/Allocate", Context()), AuthError)


def test_token_check() -> None:
    check = rpc_guard.token_check({"radium.v1.Pool": ["good"]})
    assert check("/radium.v1.Pool/Status", Context(token="good")) is None
    for token in ("", "bad"):
        refused = check("/radium.v1.Pool/Status", Context(token=token))
        assert isinstance(refused, AuthError) and "token not accepted" in refused.message
    assert isinstance(check("/radium.v1.Acceptors/Register", Context(token="good")), AuthError)


def test_tls_settings_come_as_three() -> None:
    with pytest.raises(ConfigError, match=r"client\.tls needs ca, cert and key together"):
        from_dict({"client": {"tls": {"ca": "/ca.pem"}}})
    tls = from_dict({"pool": {"tls": {"ca": "/c", "cert": "/p", "key": "/k"}}}).pool.tls
    assert tls.enabled and not from_dict({}).pool.tls.enabled
