"""TLS and bearer-token auth on both receivers: accepted and refused paths, over real sockets."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
import trustme
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from spanfactory import span, to_request

from mast_otel.collector.config import loopback
from mast_otel.collector.security import AuthConfig, TlsConfig
from mast_otel.collector.service import Collector
from mast_otel.collector.spool import SpoolConfig

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TOKEN = "s3cret-token-value"
BODY = to_request([span("5a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70", "invoke_agent a", 1, 2)]).SerializeToString()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def secured(
    chdb_dir: Path, database: str, tmp_path: Path, ca: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Collector]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    monkeypatch.setenv("TEST_COLLECTOR_TOKEN", TOKEN)
    config = loopback(str(chdb_dir), database=database, spool=SpoolConfig(directory=str(tmp_path / "spool")))
    receivers = replace(
        config.receivers,
        tls=TlsConfig(cert_file=str(cert_file), key_file=str(key_file)),
        auth=AuthConfig(bearer_token_env="TEST_COLLECTOR_TOKEN"),
    )
    with Collector(replace(config, receivers=receivers)) as running:
        yield running


def grpc_export(collector: Collector, ca: trustme.CA, token: str | None) -> None:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.cert_pem.bytes())
    with grpc.secure_channel(f"127.0.0.1:{collector.grpc_port}", credentials) as channel:
        call = channel.unary_unary(
            EXPORT, request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString
        )
        metadata = [("authorization", f"Bearer {token}")] if token else None
        call(BODY, timeout=10, metadata=metadata)


def http_export(collector: Collector, context: ssl.SSLContext, token: str | None) -> int:
    headers = {"Content-Type": "application/x-protobuf"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"https://127.0.0.1:{collector.http_port}/v1/traces", data=BODY, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_grpc_with_tls_and_token_is_accepted_without_token_refused(
    secured: Collector, ca: trustme.CA
) -> None:
    grpc_export(secured, ca, TOKEN)
    for token in (None, "wrong"):
        with pytest.raises(grpc.RpcError) as caught:
            grpc_export(secured, ca, token)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_grpc_plaintext_client_cannot_talk_to_the_tls_receiver(secured: Collector) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{secured.grpc_port}") as channel:
        call = channel.unary_unary(EXPORT, request_serializer=None)
        with pytest.raises(grpc.RpcError) as caught:
            call(BODY, timeout=5, metadata=[("authorization", f"Bearer {TOKEN}")])
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


def test_http_with_tls_and_token(secured: Collector, ca: trustme.CA) -> None:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    assert http_export(secured, context, TOKEN) == 200
    assert http_export(secured, context, None) == 401
    assert http_export(secured, context, "wrong") == 401
    untrusting = ssl.create_default_context()  # a client that doesn't trust our CA refuses the server
    with pytest.raises(urllib.error.URLError):
        http_export(secured, untrusting, TOKEN)


def test_token_never_appears_in_reprs_or_rendered_config(secured: Collector) -> None:
    from mast_otel.collector.config import render

    authenticator = secured.config.receivers.auth.authenticator()
    assert TOKEN not in repr(authenticator) and TOKEN not in render(secured.config)


def test_missing_token_fails_at_start(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    config = loopback(str(chdb_dir), database=database, spool=SpoolConfig(directory=str(tmp_path / "s")))
    receivers = replace(config.receivers, auth=AuthConfig(bearer_token_env="SURELY_NOT_SET_ANYWHERE"))
    with pytest.raises(ValueError, match="SURELY_NOT_SET_ANYWHERE"):
        Collector(replace(config, receivers=receivers))


def test_token_file_accepts_any_listed_token(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# rotated weekly\nold-token\nnew-token\n")
    authenticator = AuthConfig(bearer_token_file=str(tokens)).authenticator()
    assert authenticator is not None
    assert authenticator.accepts("Bearer new-token") and authenticator.accepts("bearer old-token")
    assert not authenticator.accepts("Bearer other") and not authenticator.accepts("Basic new-token")
