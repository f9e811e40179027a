"""The world of `mast-otel demo`: the incident catalogue and the simulated cluster the agents work on.

An `Incident` holds everything true about one outage (alerts, pods, metrics, logs, deployments, the
root cause and the fix that mitigates it). `SimulatedCluster` answers tool calls from those facts,
remembers the changes agents make, and `grade` scores a run from the cluster's final state and the
root cause the agent named, the way ITBench scores SRE agents. Nothing here talks to a real cluster.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final

from mast_otel.conversation.model import Outcome

CLUSTER: Final = "prod-eu-1"

ArgumentValue = str | int
JsonObject = Mapping[str, object]

# --- the incident catalogue --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Action:
    """A tool call as an agent issues it: the tool and its arguments (equal when both are)."""

    tool: str
    arguments: Mapping[str, ArgumentValue]


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    severity: str
    summary: str
    description: str
    labels: Mapping[str, str]
    value: str


@dataclass(frozen=True, slots=True)
class BrokenPods:
    """How an affected deployment's pods look while the incident lasts."""

    status: str  # "CrashLoopBackOff", "Evicted"...
    affected: int  # how many of the replicas
    restarts: int = 0
    last_termination: str = ""  # reason, e.g. "OOMKilled"
    exit_code: int = 0
    message: str = ""


@dataclass(frozen=True, slots=True)
class Series:
    """One time series of a metric query; `shape` says how it moves once the incident starts."""

    labels: Mapping[str, str]
    baseline: float
    peak: float
    shape: str = "step"  # "step" | "sawtooth" | "ramp" | "flat"


@dataclass(frozen=True, slots=True)
class Revision:
    number: int
    image: str
    change_cause: str
    env: Mapping[str, str] = field(default_factory=dict)
    age: str = "12d"


@dataclass(frozen=True, slots=True)
class DeploymentSpec:
    name: str
    namespace: str
    revisions: tuple[Revision, ...]  # oldest first; the last is live
    replicas: int = 3
    cpu_limit: str = "1"
    memory_limit: str = "512Mi"

    @property
    def live(self) -> Revision:
        return self.revisions[-1]


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A root cause as the grader scores it: the faulty entity and what is wrong with it."""

    entity: str
    fault: str


@dataclass(frozen=True, slots=True)
class Step:
    """One investigation call and what a competent agent learns from its result."""

    action: Action
    finding: str
    intent: str = ""  # how the agent announces the call; derived from the action when empty


@dataclass(frozen=True, slots=True)
class Incident:
    key: str
    title: str
    severity: str
    namespace: str
    service: str  # the service the alerts are about
    alerts: tuple[Alert, ...]
    investigation: tuple[Step, ...]  # after list_alerts, in the order a competent agent goes
    root_cause: Diagnosis
    fix: Action
    red_herring: Diagnosis  # the plausible wrong diagnosis
    wrong_fix: Action  # ... and the remediation it leads to
    failing_checks: tuple[str, ...]  # what check_service_health reports while the incident lasts
    health_status: str = "unhealthy"
    broken_pods: Mapping[str, BrokenPods] = field(default_factory=dict)
    metrics: Mapping[str, tuple[Series, ...]] = field(default_factory=dict)  # query -> series
    log_lines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # service -> templates
    deployments: tuple[DeploymentSpec, ...] = ()
    metric_watch: str = "the error ratio"  # what a careful agent would keep watching afterwards
    nodes: Mapping[str, str] = field(default_factory=dict)  # deployment -> the node its pods run on


_POD_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _name_hash(text: str, length: int) -> str:
    digest = hashlib.blake2b(text.encode(), digest_size=32).digest()
    return "".join(_POD_ALPHABET[byte % len(_POD_ALPHABET)] for byte in digest[:length])


def pod_name(deployment: str, ordinal: int, generation: int = 0) -> str:
    """A Kubernetes-looking pod name, stable for a deployment, new when the pod is recreated."""
    return (
        f"{deployment}-{_name_hash(deployment, 10)}-{_name_hash(f'{deployment}/{ordinal}/{generation}', 5)}"
    )


def _alert(name: str, severity: str, summary: str, description: str, value: str, **labels: str) -> Alert:
    return Alert(name, severity, summary, description, MappingProxyType(labels), value)


def _series(baseline: float, peak: float, shape: str = "step", **labels: str) -> Series:
    return Series(MappingProxyType(labels), baseline, peak, shape)


_OOM_MEMORY_QUERY = (
    'max by (pod) (container_memory_working_set_bytes{namespace="shop", container="checkout"})'
)
_ERROR_RATIO_QUERY = (
    'sum by (route) (rate(http_requests_total{namespace="payments", service="payment-api", code=~"5.."}[5m]))'
    ' / sum by (route) (rate(http_requests_total{namespace="payments", service="payment-api"}[5m]))'
)
_POOL_QUERY = 'sum by (database, pool) (pgbouncer_pools_client_waiting_connections{namespace="orders"})'
_DISK_QUERY = 'topk(5, sum by (namespace, workload) (container_fs_usage_bytes{node="ip-10-42-3-17"}))'
_CERT_QUERY = 'probe_ssl_earliest_cert_expiry{job="blackbox", instance=~"https://.*shop.example"} - time()'
_CPU_QUERY = (
    'topk(5, sum by (namespace, workload) (rate(container_cpu_usage_seconds_total{node="ip-10-42-1-9"}[5m])))'
)

# fmt: off
CATALOGUE: tuple[Incident, ...] = (
    Incident(
        key="oom-killed",
        title="checkout pods crash-looping",
        severity="critical",
        namespace="shop",
        service="checkout",
        alerts=(
            _alert("KubePodCrashLooping", "critical", "Pod shop/checkout is crash looping.",
                   "Pods of deployment checkout in namespace shop are in CrashLoopBackOff "
                   "(14 restarts in 40m).",
                   "14", namespace="shop", deployment="checkout"),
            _alert("CheckoutHighErrorRate", "warning", "checkout answers 18.7% of requests with 5xx.",
                   "5xx ratio of service checkout above 5% for 10 minutes.", "0.187",
                   namespace="shop", service="checkout"),
        ),
        investigation=(
            Step(Action("get_pod_status", {"namespace": "shop", "deployment": "checkout"}),
                 "Two of three checkout pods are in CrashLoopBackOff; the last termination was OOMKilled "
                 "(exit code 137), 14 restarts"),
            Step(Action("search_logs", {"service": "checkout", "query": "OutOfMemoryError", "since": "1h"}),
                 "The checkout logs show java.lang.OutOfMemoryError in the product-cache-loader thread "
                 "while the product cache warms up"),
            Step(Action("query_metrics", {"query": _OOM_MEMORY_QUERY, "since": "1h"}),
                 "The working set of each checkout container climbs to about 512Mi within minutes of a "
                 "start and drops when the container dies: it is killed at its memory limit",
                 intent="query the memory working set of the checkout containers"),
            Step(Action("describe_deployment", {"namespace": "shop", "deployment": "checkout"}),
                 "Revision 17 (checkout:3.8.0) turned on PRODUCT_CACHE_ENABLED but kept the 512Mi "
                 "memory limit"),
        ),
        root_cause=Diagnosis("checkout", "the 512Mi memory limit is too small for the in-memory product "
                                         "cache that v3.8.0 turned on, so the containers are OOMKilled"),
        fix=Action("set_resource_limits", {"namespace": "shop", "deployment": "checkout", "memory": "1Gi"}),
        red_herring=Diagnosis("checkout", "one checkout pod is wedged after a transient crash"),
        wrong_fix=Action("restart_pod", {"namespace": "shop", "pod": pod_name("checkout", 0)}),
        failing_checks=(
            "readiness: 1/3 pods ready, 2 in CrashLoopBackOff (last state OOMKilled)",
            "request success ratio 81.3% (objective 99%): HTTP 503 from the ingress",
        ),
        broken_pods=MappingProxyType({"checkout": BrokenPods(
            "CrashLoopBackOff", affected=2, restarts=14, last_termination="OOMKilled", exit_code=137,
            message="Back-off restarting failed container checkout")}),
        metrics=MappingProxyType({_OOM_MEMORY_QUERY: tuple(
            _series(2.3e8, 5.36e8, "sawtooth", pod=pod_name("checkout", i)) for i in range(3))}),
        log_lines=MappingProxyType({"checkout": (
            'ERROR Exception in thread "product-cache-loader" java.lang.OutOfMemoryError: Java heap space',
            "ERROR \tat com.shop.checkout.cache.ProductCache.load(ProductCache.java:{n})",
            "WARN  ProductCache warm-up at {pct}% ({n} products, {mb} MiB); "
            "OutOfMemoryError risk above 480 MiB",
            "INFO  Started CheckoutApplication in {sec} seconds (JVM running for {sec} s)",
        )}),
        deployments=(
            DeploymentSpec("checkout", "shop", (
                Revision(16, "registry.shop.internal/checkout:3.7.2", "bump dependencies",
                         {"PRODUCT_CACHE_ENABLED": "false"}, "9d"),
                Revision(17, "registry.shop.internal/checkout:3.8.0", "enable the in-memory product cache",
                         {"PRODUCT_CACHE_ENABLED": "true"}, "41m"),
            ), replicas=3, memory_limit="512Mi"),
        ),
        metric_watch="the checkout memory working set",
    ),
    Incident(
        key="bad-deploy",
        title="payment-api returning 5xx on refunds",
        severity="critical",
        namespace="payments",
        service="payment-api",
        alerts=(
            _alert("PaymentApiErrorRateHigh", "critical", "payment-api 5xx ratio at 23%.",
                   "More than 5% of payment-api requests fail with 5xx for 10 minutes.", "0.23",
                   namespace="payments", service="payment-api"),
            _alert("PaymentsSLOBurnRateFast", "warning", "payments availability SLO burning at 14x.",
                   "The 1h burn rate of the payments availability SLO is above 14.4.", "14.2",
                   namespace="payments", service="payment-api"),
        ),
        investigation=(
            Step(Action("get_pod_status", {"namespace": "payments", "deployment": "payment-api"}),
                 "All 3 payment-api pods are Running and ready with no restarts, so the pods themselves "
                 "are not the problem"),
            Step(Action("query_metrics", {"query": _ERROR_RATIO_QUERY, "since": "1h"}),
                 "The 5xx ratio jumped at 02:58 on /v1/refunds only (to about 90%), other routes are flat",
                 intent="query the 5xx ratio of payment-api by route"),
            Step(Action("search_logs", {"service": "payment-api", "query": "NullPointerException",
                                        "since": "1h"}),
                 "Every failing refund throws NullPointerException in RefundHandler.toLedgerEntry because "
                 "order.currency is null"),
            Step(Action("describe_deployment", {"namespace": "payments", "deployment": "payment-api"}),
                 "Revision 42 (payment-api:2.14.0) rolled out at 02:57, one minute before the errors "
                 "started; revision 41 ran 2.13.3"),
        ),
        root_cause=Diagnosis("payment-api", "release 2.14.0 (revision 42) introduced a NullPointerException "
                                            "in the refund handler"),
        fix=Action("rollback_deployment", {"namespace": "payments", "deployment": "payment-api",
                                           "to_revision": 41}),
        red_herring=Diagnosis("payment-api", "payment-api is under-provisioned for the refund traffic"),
        wrong_fix=Action("scale_deployment", {"namespace": "payments", "deployment": "payment-api",
                                              "replicas": 6}),
        failing_checks=(
            "request success ratio 76.6% (objective 99.5%): HTTP 500 on POST /v1/refunds",
            "synthetic refund probe failed 12 of the last 12 runs",
        ),
        metrics=MappingProxyType({_ERROR_RATIO_QUERY: (
            _series(0.001, 0.91, "step", route="/v1/refunds"),
            _series(0.002, 0.003, "flat", route="/v1/charges"),
            _series(0.001, 0.001, "flat", route="/v1/payouts"),
        )}),
        log_lines=MappingProxyType({"payment-api": (
            'ERROR POST /v1/refunds 500 in {ms}ms: java.lang.NullPointerException: Cannot invoke '
            '"com.shop.payments.Currency.getCode()" because "order.currency" is null',
            "ERROR \tat com.shop.payments.refund.RefundHandler.toLedgerEntry(RefundHandler.java:{n})",
            "INFO  POST /v1/charges 200 in {ms}ms",
            "INFO  GET /v1/payouts/{id} 200 in {ms}ms",
        )}),
        deployments=(
            DeploymentSpec("payment-api", "payments", (
                Revision(40, "registry.shop.internal/payment-api:2.13.1", "fix payout rounding", age="21d"),
                Revision(41, "registry.shop.internal/payment-api:2.13.3", "bump TLS library", age="6d"),
                Revision(42, "registry.shop.internal/payment-api:2.14.0", "multi-currency refunds",
                         age="58m"),
            ), replicas=3, cpu_limit="2", memory_limit="1Gi"),
        ),
        metric_watch="the refund 5xx ratio",
    ),
    Incident(
        key="db-pool-exhaustion",
        title="orders-api latency and timeouts",
        severity="critical",
        namespace="orders",
        service="orders-api",
        alerts=(
            _alert("OrdersApiLatencyHigh", "critical", "orders-api p99 latency at 4.2s.",
                   "p99 latency of orders-api above 800ms for 15 minutes.", "4.21",
                   namespace="orders", service="orders-api"),
            _alert("OrdersApiErrorBudgetBurn", "warning", "orders-api burns its error budget at 6x.",
                   "6.1% of orders-api requests time out.", "0.061",
                   namespace="orders", service="orders-api"),
        ),
        investigation=(
            Step(Action("get_pod_status", {"namespace": "orders", "deployment": "orders-api"}),
                 "The 4 orders-api pods are Running and ready with no restarts"),
            Step(Action("search_logs", {"service": "orders-api", "query": "HikariPool", "since": "1h"}),
                 "orders-api threads wait 30s for a database connection from pgbouncer.orders.svc and "
                 "give up (HikariPool: connection is not available)"),
            Step(Action("query_metrics", {"query": _POOL_QUERY, "since": "1h"}),
                 "Since 02:40 about 140 clients queue for the orders pool in pgbouncer while it serves 20",
                 intent="query how many clients wait on the pgbouncer pools"),
            Step(Action("describe_deployment", {"namespace": "orders", "deployment": "pgbouncer"}),
                 "pgbouncer runs as a single replica with DEFAULT_POOL_SIZE=20, sized before the traffic "
                 "of the spring promotion tripled"),
        ),
        root_cause=Diagnosis("pgbouncer", "the single pgbouncer replica (pool size 20) is exhausted by "
                                          "three times the usual orders traffic"),
        fix=Action("scale_deployment", {"namespace": "orders", "deployment": "pgbouncer", "replicas": 3}),
        red_herring=Diagnosis("orders-api", "one orders-api pod holds leaked connections"),
        wrong_fix=Action("restart_pod", {"namespace": "orders", "pod": pod_name("orders-api", 0)}),
        failing_checks=(
            "latency p99 4210 ms (objective 800 ms)",
            "request success ratio 93.9%: requests timed out waiting for a database connection",
        ),
        health_status="degraded",
        metrics=MappingProxyType({_POOL_QUERY: (
            _series(0.0, 141.0, "step", database="orders", pool="orders_rw"),
            _series(0.0, 37.0, "step", database="orders", pool="orders_ro"),
            _series(0.0, 0.0, "flat", database="inventory", pool="inventory_rw"),
        )}),
        log_lines=MappingProxyType({"orders-api": (
            "ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms "
            "(pgbouncer.orders.svc:6432, active=20, idle=0, waiting={n})",
            "ERROR GET /v1/orders/{id} 503 after {ms}ms: SQLTransientConnectionException from HikariPool-1",
            "WARN  HikariPool-1 - Thread starvation or clock leap detected (housekeeper delta={ms}ms)",
            "INFO  GET /v1/orders/{id} 200 in {ms}ms",
        )}),
        deployments=(
            DeploymentSpec("pgbouncer", "orders", (
                Revision(3, "registry.shop.internal/pgbouncer:1.23.1", "initial pool sizing",
                         {"DEFAULT_POOL_SIZE": "20", "MAX_CLIENT_CONN": "400"}, "140d"),
            ), replicas=1, cpu_limit="500m", memory_limit="256Mi"),
            DeploymentSpec("orders-api", "orders", (
                Revision(28, "registry.shop.internal/orders-api:5.2.0", "promotion banner", age="3d"),
            ), replicas=4, cpu_limit="2", memory_limit="2Gi"),
        ),
        metric_watch="the pgbouncer client queue",
    ),
    Incident(
        key="disk-pressure",
        title="search-api pods evicted",
        severity="critical",
        namespace="search",
        service="search-api",
        alerts=(
            _alert("KubeNodeDiskPressure", "critical", "Node ip-10-42-3-17 has DiskPressure.",
                   "Node ip-10-42-3-17 reports DiskPressure; the kubelet evicts pods.", "1",
                   node="ip-10-42-3-17"),
            _alert("SearchApiAvailabilityLow", "critical", "search-api has 2/4 replicas available.",
                   "Pods of search-api were evicted from ip-10-42-3-17.", "0.5",
                   namespace="search", service="search-api"),
        ),
        investigation=(
            Step(Action("get_pod_status", {"namespace": "search", "deployment": "search-api"}),
                 "Two of four search-api pods were evicted from ip-10-42-3-17 for low ephemeral storage"),
            Step(Action("query_metrics", {"query": _DISK_QUERY, "since": "1h"}),
                 "On ip-10-42-3-17 the search-indexer workload grew from 2 GB to about 41 GB of disk in "
                 "the last hour; everything else is small",
                 intent="query the top disk users on node ip-10-42-3-17"),
            Step(Action("search_logs", {"service": "search-indexer", "query": "DEBUG", "since": "1h"}),
                 "search-indexer writes several DEBUG lines for every document it indexes"),
            Step(Action("describe_deployment", {"namespace": "search", "deployment": "search-indexer"}),
                 "Revision 8 of search-indexer set LOG_LEVEL=debug an hour ago; revision 7 ran with "
                 "LOG_LEVEL=info"),
        ),
        root_cause=Diagnosis("search-indexer", "revision 8 turned on debug logging, the log volume filled "
                                               "the node disk and the kubelet evicted search-api pods"),
        fix=Action("rollback_deployment", {"namespace": "search", "deployment": "search-indexer",
                                           "to_revision": 7}),
        red_herring=Diagnosis("search-api", "search-api pods were evicted by a transient node hiccup"),
        wrong_fix=Action("restart_pod", {"namespace": "search", "pod": pod_name("search-api", 0)}),
        failing_checks=(
            "readiness: 2/4 pods ready, 2 Evicted (node ip-10-42-3-17 has DiskPressure)",
            "search latency p99 1900 ms (objective 400 ms)",
        ),
        broken_pods=MappingProxyType({"search-api": BrokenPods(
            "Evicted", affected=2,
            message="The node was low on resource: ephemeral-storage. "
                    "Container search-api was using 118Mi.")}),
        metrics=MappingProxyType({_DISK_QUERY: (
            _series(2.1e9, 4.12e10, "ramp", namespace="search", workload="search-indexer"),
            _series(6.0e8, 6.1e8, "flat", namespace="search", workload="search-api"),
            _series(3.1e8, 3.1e8, "flat", namespace="monitoring", workload="node-exporter"),
            _series(2.2e8, 2.3e8, "flat", namespace="logging", workload="fluent-bit"),
        )}),
        log_lines=MappingProxyType({"search-indexer": (
            "DEBUG indexer.batch doc_id={id} fields={n} analyzer=standard tokens={n} took={ms}ms",
            "DEBUG indexer.segment merge candidate seg_{n} size={mb}MB deletes={pct}%",
            "DEBUG indexer.http request body={n}B route=/internal/index",
            "INFO  indexer.batch committed {n} documents",
        )}),
        deployments=(
            DeploymentSpec("search-indexer", "search", (
                Revision(7, "registry.shop.internal/search-indexer:4.0.2", "schedule nightly merge",
                         {"LOG_LEVEL": "info"}, "17d"),
                Revision(8, "registry.shop.internal/search-indexer:4.0.2", "debug duplicate documents",
                         {"LOG_LEVEL": "debug"}, "63m"),
            ), replicas=1, cpu_limit="2", memory_limit="4Gi"),
            DeploymentSpec("search-api", "search", (
                Revision(12, "registry.shop.internal/search-api:2.9.4", "synonyms update", age="8d"),
            ), replicas=4, cpu_limit="1", memory_limit="1Gi"),
        ),
        metric_watch="the disk usage on ip-10-42-3-17",
        nodes=MappingProxyType({"search-api": "ip-10-42-3-17", "search-indexer": "ip-10-42-3-17"}),
    ),
    Incident(
        key="certificate-expiry",
        title="TLS handshakes failing on api.shop.example",
        severity="critical",
        namespace="edge",
        service="api-gateway",
        alerts=(
            _alert("BlackboxSSLCertificateExpired", "critical",
                   "Certificate of https://api.shop.example expired.",
                   "Certificate edge/api-gateway-tls (managed by cert-manager) expired 47 minutes ago.",
                   "-2820", namespace="edge", instance="https://api.shop.example"),
            _alert("ApiGatewayHandshakeFailures", "warning", "api-gateway rejects 96% of TLS handshakes.",
                   "Clients fail the TLS handshake with api-gateway.", "0.96",
                   namespace="edge", service="api-gateway"),
        ),
        investigation=(
            Step(Action("get_pod_status", {"namespace": "edge", "deployment": "api-gateway"}),
                 "The api-gateway pods are Running and ready"),
            Step(Action("query_metrics", {"query": _CERT_QUERY, "since": "6h"}),
                 "The certificate served on api.shop.example ran out 47 minutes ago; docs.shop.example "
                 "still has 61 days",
                 intent="query the remaining certificate lifetime of the shop endpoints"),
            Step(Action("search_logs", {"service": "cert-manager", "query": "api-gateway-tls",
                                        "since": "24h"}),
                 "cert-manager failed to renew edge/api-gateway-tls three days ago (ACME rate limit) and "
                 "backed off until after expiry"),
            Step(Action("describe_deployment", {"namespace": "edge", "deployment": "api-gateway"}),
                 "api-gateway serves the secret api-gateway-tls, which still holds the expired certificate"),
        ),
        root_cause=Diagnosis("api-gateway-tls", "the certificate expired because cert-manager's renewal hit "
                                                "the ACME rate limit and was never retried in time"),
        fix=Action("renew_certificate", {"namespace": "edge", "certificate": "api-gateway-tls"}),
        red_herring=Diagnosis("api-gateway", "an api-gateway pod serves a stale TLS session cache"),
        wrong_fix=Action("restart_pod", {"namespace": "edge", "pod": pod_name("api-gateway", 0)}),
        failing_checks=(
            "tls: certificate for api.shop.example has expired; handshakes failing",
            "request success ratio 4.1% (objective 99.9%)",
        ),
        metrics=MappingProxyType({_CERT_QUERY: (
            _series(18000.0, -2820.0, "ramp", instance="https://api.shop.example"),
            _series(5.28e6, 5.27e6, "flat", instance="https://docs.shop.example"),
        )}),
        log_lines=MappingProxyType({"cert-manager": (
            'ERROR cert-manager/certificates-issuing "msg"="failed to renew certificate" '
            '"key"="edge/api-gateway-tls" "error"="429 urn:ietf:params:acme:error:rateLimited: too many '
            'certificates already issued for exact set of domains"',
            'WARN  cert-manager/certificates-readiness "msg"="certificate is not ready" '
            '"key"="edge/api-gateway-tls" "reason"="Expired" "backoff"="{n}h"',
            'INFO  cert-manager/certificates-trigger "msg"="certificate does not need renewal" '
            '"key"="edge/docs-tls" "renewal_in"="{n}h"',
        )}),
        deployments=(
            DeploymentSpec("api-gateway", "edge", (
                Revision(31, "registry.shop.internal/api-gateway:1.19.0", "rate limit tuning",
                         {"TLS_SECRET": "api-gateway-tls"}, "11d"),
            ), replicas=3, cpu_limit="2", memory_limit="1Gi"),
        ),
        metric_watch="the TLS handshake success ratio",
    ),
    Incident(
        key="noisy-neighbour",
        title="recommendation latency high",
        severity="warning",
        namespace="recs",
        service="recommendation",
        alerts=(
            _alert("RecommendationLatencyHigh", "warning", "recommendation p99 latency at 2.8s.",
                   "p99 latency of recommendation above 500ms for 20 minutes.", "2.78",
                   namespace="recs", service="recommendation"),
            _alert("NodeCPUSaturation", "warning", "Node ip-10-42-1-9 CPU at 97%.",
                   "CPU utilisation of node ip-10-42-1-9 above 90% for 15 minutes.", "0.97",
                   node="ip-10-42-1-9"),
        ),
        investigation=(
            Step(Action("get_pod_status", {"namespace": "recs", "deployment": "recommendation"}),
                 "The recommendation pods are Running and ready, all three on node ip-10-42-1-9"),
            Step(Action("search_logs", {"service": "recommendation", "query": "slow", "since": "1h"}),
                 "The recommendation logs show slow requests of 2-3 s and a saturated scoring pool"),
            Step(Action("query_metrics", {"query": _CPU_QUERY, "since": "1h"}),
                 "Since 02:40 the feature-backfill workload of namespace ml-batch burns about 14 cores on "
                 "ip-10-42-1-9 while recommendation gets barely one",
                 intent="query the top CPU users on node ip-10-42-1-9"),
            Step(Action("describe_deployment", {"namespace": "ml-batch", "deployment": "feature-backfill"}),
                 "feature-backfill has no CPU limit and was scheduled onto ip-10-42-1-9 at 02:38"),
        ),
        root_cause=Diagnosis("feature-backfill", "the feature-backfill job of ml-batch has no CPU limit and "
                                                 "starves recommendation on the shared node"),
        fix=Action("set_resource_limits", {"namespace": "ml-batch", "deployment": "feature-backfill",
                                           "cpu": "2"}),
        red_herring=Diagnosis("recommendation", "recommendation needs more replicas for its traffic"),
        wrong_fix=Action("scale_deployment", {"namespace": "recs", "deployment": "recommendation",
                                              "replicas": 6}),
        failing_checks=(
            "latency p99 2780 ms (objective 500 ms)",
            "cpu throttling 71% of periods",
        ),
        health_status="degraded",
        metrics=MappingProxyType({_CPU_QUERY: (
            _series(0.2, 14.2, "step", namespace="ml-batch", workload="feature-backfill"),
            _series(2.9, 0.9, "step", namespace="recs", workload="recommendation"),
            _series(0.3, 0.3, "flat", namespace="monitoring", workload="node-exporter"),
            _series(0.1, 0.1, "flat", namespace="logging", workload="fluent-bit"),
        )}),
        log_lines=MappingProxyType({"recommendation": (
            "WARN  slow request GET /v1/recommendations user={id} took {ms}ms (scoring {ms}ms)",
            "WARN  scoring pool saturated: {n} tasks queued; slow responses expected",
            "INFO  GET /v1/recommendations user={id} 200 in {ms}ms",
        )}),
        deployments=(
            DeploymentSpec("feature-backfill", "ml-batch", (
                Revision(2, "registry.shop.internal/feature-backfill:0.4.0", "backfill Q1 features",
                         {"WORKERS": "32"}, "52m"),
            ), replicas=1, cpu_limit="", memory_limit="8Gi"),
            DeploymentSpec("recommendation", "recs", (
                Revision(19, "registry.shop.internal/recommendation:7.1.0", "new ranking model", age="5d"),
            ), replicas=3, cpu_limit="2", memory_limit="2Gi"),
        ),
        metric_watch="the recommendation p99 latency",
        nodes=MappingProxyType({"recommendation": "ip-10-42-1-9"}),
    ),
)

# fmt: on

# Services a derailed agent wanders off to: none of them appears anywhere in the catalogue.
UNRELATED_SERVICES: tuple[tuple[str, str], ...] = (
    ("kafka", "streaming"),
    ("redis-sessions", "cache"),
    ("email-dispatcher", "notifications"),
    ("ledger-sync", "finance"),
    ("image-resizer", "media"),
)


# --- the simulated cluster ---------------------------------------------------------------------

# The cluster's tools, reads first; `SimulatedCluster` implements each as the method `_<name>`.
TOOLS: Final = (
    "list_alerts",
    "get_pod_status",
    "query_metrics",
    "search_logs",
    "describe_deployment",
    "check_service_health",
    "restart_pod",
    "rollback_deployment",
    "scale_deployment",
    "set_resource_limits",
    "renew_certificate",
)


@dataclass(frozen=True, slots=True)
class ToolResult:
    output: str | JsonObject
    error_type: str = ""  # set when the tool call failed

    @property
    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, separators=(",", ":"))


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fill(template: str, rng: random.Random) -> str:
    values = {
        "n": rng.randint(2, 9999),
        "ms": rng.randint(900, 4200),
        "mb": rng.randint(40, 900),
        "pct": rng.randint(10, 99),
        "sec": round(rng.uniform(4, 19), 1),
        "id": rng.randint(10000, 99999),
    }
    return template.format(**values)


_MAX_LOG_LINES = 32  # search_logs returns the most recent matches, like `tail`
_INFO_LINES = (
    "INFO  GET /healthz 200 in 1ms",
    "INFO  GET /readyz 200 in 2ms",
    "INFO  request completed route=/api status=200 duration_ms={ms}",
    "INFO  flushed {n} metric series",
    "INFO  config reloaded (version {id})",
)


class SimulatedCluster:
    """One incident's world: answers tool calls from the incident's facts and remembers changes.

    Results are a pure function of the call and the cluster's state, so repeating a call without a
    change in between returns exactly the same result (as a stuck agent sees it).
    """

    def __init__(self, incident: Incident, now: datetime, seed: str) -> None:
        self.incident = incident
        self.now = now
        self._seed = seed
        self._mitigated = False
        self._calls = 0
        self.calls_before_mitigation = 0  # tool calls up to and including the one that mitigated
        self._changes = 0  # counts state changes, so that results after a change differ
        self._deployments = {(d.namespace, d.name): d for d in incident.deployments}
        self._generation: dict[tuple[str, int], int] = {}  # (deployment, ordinal) -> times recreated
        self._tools: dict[str, Callable[..., ToolResult]] = {
            name: getattr(self, f"_{name}") for name in TOOLS
        }

    @property
    def mitigated(self) -> bool:
        return self._mitigated

    def call(self, action: Action) -> ToolResult:
        self._calls += 1
        tool = self._tools.get(action.tool)
        if tool is None:
            return ToolResult(f"unknown tool {action.tool!r}", error_type="ToolNotFound")
        result = tool(**action.arguments)
        if not result.error_type and not self._mitigated and action == self.incident.fix:
            self._mitigated = True
            self.calls_before_mitigation = self._calls
        return result

    # Every tool's randomness comes from here: the same call in the same state draws the same numbers.
    def _rng(self, *parts: object) -> random.Random:
        return random.Random("|".join([self._seed, str(self._changes), *map(str, parts)]))

    # --- reads ---

    def _list_alerts(self, namespace: str = "") -> ToolResult:
        incident = self.incident
        firing = [] if self._mitigated or namespace not in ("", incident.namespace) else incident.alerts
        rng = self._rng("alerts")
        alerts = [
            {
                "labels": {"alertname": alert.name, "severity": alert.severity, **alert.labels},
                "annotations": {"summary": alert.summary, "description": alert.description},
                "state": "firing",
                "activeAt": _stamp(self.now - timedelta(minutes=rng.randint(12, 40))),
                "value": alert.value,
            }
            for alert in firing
        ]
        return ToolResult({"status": "success", "cluster": CLUSTER, "data": {"alerts": alerts}})

    def _pods(self, namespace: str, deployment: str) -> list[dict[str, object]]:
        spec = self._deployments.get((namespace, deployment))
        replicas = spec.replicas if spec is not None else 2
        broken = None if self._mitigated else self.incident.broken_pods.get(deployment)
        rng = self._rng("pods", namespace, deployment)
        node = self.incident.nodes.get(deployment, "")
        pods: list[dict[str, object]] = []
        for ordinal in range(replicas):
            generation = self._generation.get((deployment, ordinal), 0)
            pod: dict[str, object] = {
                "name": pod_name(deployment, ordinal, generation),
                "node": node or f"ip-10-42-{rng.randint(1, 6)}-{rng.randint(2, 250)}",
                "age": "3m" if generation else f"{rng.randint(2, 19)}d",
            }
            if broken is not None and ordinal < broken.affected:
                pod.update(ready="0/1", status=broken.status, restarts=broken.restarts + generation)
                if broken.last_termination:
                    pod["last_state"] = {
                        "terminated": {"reason": broken.last_termination, "exit_code": broken.exit_code}
                    }
                if broken.message:
                    pod["message"] = broken.message
            else:
                pod.update(ready="1/1", status="Running", restarts=0)
            pods.append(pod)
        return pods

    def _get_pod_status(self, namespace: str, deployment: str) -> ToolResult:
        return ToolResult(
            {"namespace": namespace, "deployment": deployment, "pods": self._pods(namespace, deployment)}
        )

    def _query_metrics(self, query: str, since: str = "1h") -> ToolResult:
        # A query the incident knows nothing about matches no series, as in Prometheus.
        series = self.incident.metrics.get(query, ())
        rng = self._rng("metrics", query)
        points = 61
        start = int(self.now.timestamp()) - 60 * (points - 1)
        onset = 24 + rng.randint(0, 8)
        result = []
        for one in series:
            values = []
            for i in range(points):
                value = _shape(one, i, onset, points) * (1.0 + rng.uniform(-0.03, 0.03))
                if self._mitigated and i >= points - 4:
                    value = one.baseline
                values.append([start + 60 * i, f"{value:.6g}"])
            result.append({"metric": dict(one.labels), "values": values})
        return ToolResult(
            {
                "status": "success",
                "data": {"resultType": "matrix", "result": result},
                "query": query,
                "since": since,
                "step": "60s",
            }
        )

    def _search_logs(self, service: str, query: str = "", since: str = "1h") -> ToolResult:
        rng = self._rng("logs", service)
        templates = self.incident.log_lines.get(service, ())
        lines = []
        moment = self.now - timedelta(minutes=60)
        for i in range(90):
            moment += timedelta(milliseconds=rng.randint(5000, 75000))
            recovered = self._mitigated and i >= 80
            pool = templates if templates and not recovered and rng.random() < 0.7 else _INFO_LINES
            level_and_message = _fill(rng.choice(pool), rng)
            lines.append(
                f"{_stamp(min(moment, self.now))} {level_and_message[:5]} {service} "
                f"[{rng.choice(('main', 'worker-1', 'worker-2', 'http-nio-8080-exec-4'))}] "
                f"{level_and_message[6:]}"
            )
        terms = [term.lower() for term in query.replace("|", " ").split() if term]
        matched = [line for line in lines if not terms or any(term in line.lower() for term in terms)]
        header = (
            f"{len(matched)} of {len(lines)} lines from service {service} in the last {since} match {query!r}"
        )
        return ToolResult("\n".join([header, *matched[-_MAX_LOG_LINES:]]))

    def _describe_deployment(self, namespace: str, deployment: str) -> ToolResult:
        spec = self._deployments.get((namespace, deployment))
        if spec is None:
            spec = DeploymentSpec(
                deployment,
                namespace,
                (Revision(5, f"registry.shop.internal/{deployment}:1.4.2", "routine update"),),
                replicas=2,
            )
        pods = self._pods(namespace, deployment)
        ready = sum(1 for pod in pods if pod["ready"] == "1/1")
        live = spec.live
        lines = [
            f"Name:                   {spec.name}",
            f"Namespace:              {spec.namespace}",
            f"Labels:                 app.kubernetes.io/name={spec.name}",
            f"Annotations:            deployment.kubernetes.io/revision: {live.number}",
            f"                        kubernetes.io/change-cause: {live.change_cause}",
            f"Replicas:               {spec.replicas} desired | {spec.replicas} updated | "
            f"{len(pods)} total | {ready} available | {len(pods) - ready} unavailable",
            "StrategyType:           RollingUpdate",
            "Pod Template:",
            "  Containers:",
            f"   {spec.name}:",
            f"    Image:      {live.image}",
            "    Limits:",
            f"      cpu:     {spec.cpu_limit or '<none>'}",
            f"      memory:  {spec.memory_limit or '<none>'}",
            "    Environment:",
            *(f"      {key}:  {value}" for key, value in sorted(live.env.items())),
            "Conditions:",
            "  Type           Status  Reason",
            f"  Available      {'True ' if ready == len(pods) else 'False'}   "
            f"{'MinimumReplicasAvailable' if ready == len(pods) else 'MinimumReplicasUnavailable'}",
            "  Progressing    True    NewReplicaSetAvailable",
            "Revision history:",
            "  REVISION  AGE   IMAGE                                           CHANGE-CAUSE",
            *(f"  {r.number:<9} {r.age:<5} {r.image:<47} {r.change_cause}" for r in spec.revisions),
        ]
        return ToolResult("\n".join(lines))

    def _check_service_health(self, namespace: str, service: str) -> ToolResult:
        incident = self.incident
        rng = self._rng("health", namespace, service)
        if not self._mitigated and (namespace, service) == (incident.namespace, incident.service):
            return ToolResult(
                {
                    "service": service,
                    "namespace": namespace,
                    "status": incident.health_status,
                    "checks": [
                        {"name": f"check-{i + 1}", "result": "fail", "detail": detail}
                        for i, detail in enumerate(incident.failing_checks)
                    ],
                }
            )
        return ToolResult(
            {
                "service": service,
                "namespace": namespace,
                "status": "healthy",
                "checks": [
                    {"name": "readiness", "result": "pass", "observed": "all replicas ready"},
                    {
                        "name": "request-success-ratio",
                        "result": "pass",
                        "observed": f"{100 - rng.uniform(0.05, 0.4):.2f}%",
                    },
                    {"name": "latency-p99", "result": "pass", "observed": f"{rng.randint(90, 380)} ms"},
                ],
            }
        )

    # --- changes ---

    def _restart_pod(self, namespace: str, pod: str) -> ToolResult:
        live = {
            pod_name(spec.name, ordinal, self._generation.get((spec.name, ordinal), 0)): (spec.name, ordinal)
            for spec in self._deployments.values()
            if spec.namespace == namespace
            for ordinal in range(spec.replicas)
        }
        if pod not in live:
            return ToolResult(f'pods "{pod}" not found in namespace {namespace}', error_type="NotFound")
        deployment, ordinal = live[pod]
        generation = self._generation.get((deployment, ordinal), 0) + 1
        self._generation[(deployment, ordinal)] = generation
        self._changes += 1
        return ToolResult(
            {
                "pod": pod,
                "namespace": namespace,
                "action": "deleted",
                "replacement": pod_name(deployment, ordinal, generation),
            }
        )

    def _rollback_deployment(self, namespace: str, deployment: str, to_revision: int) -> ToolResult:
        spec = self._deployments.get((namespace, deployment))
        target = next((r for r in spec.revisions if r.number == to_revision), None) if spec else None
        if spec is None or target is None:
            return ToolResult(
                f"deployment {namespace}/{deployment} has no revision {to_revision}",
                error_type="RevisionNotFound",
            )
        revived = replace(target, number=spec.live.number + 1, age="0s")
        self._deployments[(namespace, deployment)] = replace(spec, revisions=(*spec.revisions, revived))
        self._changes += 1
        return ToolResult(
            {
                "deployment": deployment,
                "namespace": namespace,
                "rolled_back_to": to_revision,
                "new_revision": revived.number,
                "image": revived.image,
                "rollout": "started",
            }
        )

    def _scale_deployment(self, namespace: str, deployment: str, replicas: int) -> ToolResult:
        spec = self._deployments.get((namespace, deployment))
        previous = spec.replicas if spec is not None else 2
        if spec is not None:
            self._deployments[(namespace, deployment)] = replace(spec, replicas=replicas)
        self._changes += 1
        return ToolResult(
            {
                "deployment": deployment,
                "namespace": namespace,
                "replicas": {"from": previous, "to": replicas},
                "rollout": "started",
            }
        )

    def _set_resource_limits(
        self, namespace: str, deployment: str, cpu: str = "", memory: str = ""
    ) -> ToolResult:
        spec = self._deployments.get((namespace, deployment))
        if spec is not None:
            self._deployments[(namespace, deployment)] = replace(
                spec, cpu_limit=cpu or spec.cpu_limit, memory_limit=memory or spec.memory_limit
            )
        self._changes += 1
        limits = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value}
        return ToolResult(
            {"deployment": deployment, "namespace": namespace, "limits": limits, "rollout": "started"}
        )

    def _renew_certificate(self, namespace: str, certificate: str) -> ToolResult:
        self._changes += 1
        not_after = self.now + timedelta(days=90)
        return ToolResult(
            {
                "certificate": f"{namespace}/{certificate}",
                "issuer": "letsencrypt-prod",
                "status": "Issued",
                "not_after": _stamp(not_after),
            }
        )


def _shape(series: Series, i: int, onset: int, points: int) -> float:
    if series.shape == "flat" or (i < onset and series.shape != "sawtooth"):
        return series.baseline
    if series.shape == "step":
        return series.peak
    if series.shape == "ramp":
        return series.baseline + (series.peak - series.baseline) * (i - onset + 1) / (points - onset)
    # Sawtooth: climbs to the limit in six minutes, then the kill; each series at its own phase.
    phase = (i + int(_name_hash(json.dumps(dict(series.labels), sort_keys=True), 1), 36)) % 6
    return series.baseline + (series.peak - series.baseline) * phase / 5


# --- grading -----------------------------------------------------------------------------------


def grade(cluster: SimulatedCluster, named: Diagnosis | None) -> tuple[Outcome, float]:
    """ITBench-style: half for naming the root cause (entity and fault), half for mitigating it.

    `named` is the root cause the agent stated, None when it never gave a final answer.
    """
    recall = 0.0
    if named is not None:
        truth = cluster.incident.root_cause
        recall = 0.5 * (named.entity == truth.entity) + 0.5 * (named.fault == truth.fault)
    mitigation = 0.0
    if cluster.mitigated:
        # Slower mitigation earns less, as time-to-mitigate does in ITBench.
        mitigation = max(0.5, 1.0 - 0.05 * max(0, cluster.calls_before_mitigation - 5))
    score = round(0.5 * recall + 0.5 * mitigation, 2)
    succeeded = cluster.mitigated and recall == 1.0
    return (Outcome.SUCCESS if succeeded else Outcome.FAILURE), score
