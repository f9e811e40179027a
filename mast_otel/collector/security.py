"""Receiver security: optional TLS and optional bearer-token authentication for both receivers.

Tokens come from an environment variable or a file (one token per line, so a token can be rotated by
adding the new one before removing the old), never from the config file itself, and are never
logged. Comparison is constant-time.
"""

from __future__ import annotations

import hmac
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import grpc

_STRICT: dict[str, Any] = {"extra": "forbid"}


@dataclass(frozen=True, slots=True)
class TlsConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    cert_file: str = ""  # PEM certificate chain; TLS is on when cert_file and key_file are set
    key_file: str = ""
    client_ca_file: str = ""  # when set, clients must present a certificate signed by this CA (mTLS)

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("tls needs both cert_file and key_file")

    @property
    def enabled(self) -> bool:
        return bool(self.cert_file)

    def grpc_credentials(self) -> grpc.ServerCredentials:
        key, cert = Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes()
        ca = Path(self.client_ca_file).read_bytes() if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.client_ca_file:
            context.load_verify_locations(self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context


@dataclass(frozen=True, slots=True)
class AuthConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    bearer_token_env: str = ""  # name of an environment variable holding the token
    bearer_token_file: str = ""  # a file with one accepted token per line

    @property
    def enabled(self) -> bool:
        return bool(self.bearer_token_env or self.bearer_token_file)

    def authenticator(self) -> BearerAuthenticator | None:
        if not self.enabled:
            return None
        tokens: list[str] = []
        if self.bearer_token_env:
            value = os.environ.get(self.bearer_token_env, "").strip()
            if not value:
                raise ValueError(f"auth.bearer_token_env names {self.bearer_token_env}, which is not set")
            tokens.append(value)
        if self.bearer_token_file:
            try:
                lines = Path(self.bearer_token_file).read_text().splitlines()
            except OSError as exc:
                raise ValueError(f"cannot read auth.bearer_token_file: {exc.strerror}") from None
            tokens.extend(line.strip() for line in lines if line.strip() and not line.startswith("#"))
        if not tokens:
            raise ValueError("auth is configured but no token was found")
        return BearerAuthenticator(tuple(tokens))


class BearerAuthenticator:
    def __init__(self, tokens: tuple[str, ...]) -> None:
        self._tokens = tuple(t.encode() for t in tokens)

    def __repr__(self) -> str:
        return f"BearerAuthenticator({len(self._tokens)} token(s))"

    def accepts(self, authorization: str | None) -> bool:
        """True for an `Authorization: Bearer <token>` value carrying an accepted token."""
        if not authorization:
            return False
        scheme, _, credential = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        offered = credential.strip().encode()
        return any(hmac.compare_digest(offered, token) for token in self._tokens)

    def grpc_interceptor(self) -> grpc.ServerInterceptor:
        return _GrpcBearerInterceptor(self)


class _GrpcBearerInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, authenticator: BearerAuthenticator) -> None:
        self._authenticator = authenticator

        def deny(request: object, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        metadata = dict(details.invocation_metadata or ())
        if self._authenticator.accepts(metadata.get("authorization")):
            return continuation(details)
        return self._deny
