"""docker-compose.yml, validated statically (no Docker engine runs here): services, health checks,
ports, and every file it mounts or builds from exists in the repository and agrees with the rest."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
import yaml

from mast_otel.dashboards.files import DASHBOARDS_IN_GRAFANA, READER_PASSWORD_ENV, READER_USER
from mast_otel.dashboards.panels import PLUGIN_TYPE, PLUGIN_VERSION

ROOT = Path(__file__).resolve().parent.parent
SERVICES = {"clickhouse", "grafana", "mast-otel-collector", "otelcol-gateway"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    return document


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    mounts = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            mounts.append((source, target))
    return mounts


def test_the_services_and_their_health_checks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == SERVICES
    for name in ("clickhouse", "grafana", "mast-otel-collector"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    assert services["mast-otel-collector"]["depends_on"]["clickhouse"]["condition"] == "service_healthy"
    assert services["grafana"]["depends_on"]["clickhouse"]["condition"] == "service_healthy"
    assert services["otelcol-gateway"]["depends_on"]["mast-otel-collector"]["condition"] == "service_healthy"
    assert set(compose["volumes"]) >= {"clickhouse-data", "grafana-data", "collector-data"}


def test_host_ports_are_unique_and_documented(compose: dict[str, Any]) -> None:
    header = (ROOT / "docker-compose.yml").read_text(encoding="utf-8").split("name:")[0]
    host_ports = [
        mapping.split(":")[0]
        for service in compose["services"].values()
        for mapping in service.get("ports", [])
    ]
    assert len(host_ports) == len(set(host_ports))
    for port in host_ports:
        assert re.search(rf"\b{port}\b", header), f"port {port} is not documented in the header"
    collector = compose["services"]["mast-otel-collector"]["ports"]
    assert {"13133:13133", "8888:8888"} <= set(collector)  # admin and metrics, as the collector serves them
    assert {"4317:4317", "4318:4318"} <= set(compose["services"]["otelcol-gateway"]["ports"])


def test_every_mounted_and_built_path_exists(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for source, _ in bind_mounts(service):
            assert (ROOT / source).exists(), f"{name} mounts missing {source}"
    build = compose["services"]["mast-otel-collector"]["build"]
    assert (ROOT / build["context"] / build["dockerfile"]).is_file()


def test_grafana_gets_the_plugin_and_the_generated_provisioning(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    mounts = dict(bind_mounts(grafana))
    assert mounts["./dashboards/provisioning"] == ["/etc/grafana/provisioning", "ro"][0]
    assert mounts["./dashboards"] == DASHBOARDS_IN_GRAFANA
    assert grafana["environment"]["GF_PLUGINS_PREINSTALL_SYNC"] == f"{PLUGIN_TYPE}@{PLUGIN_VERSION}"
    assert READER_PASSWORD_ENV in grafana["environment"]
    for kind in ("datasources", "dashboards", "alerting"):
        assert list((ROOT / "dashboards" / "provisioning" / kind).glob("*.yaml"))


def test_collector_writes_with_the_writer_user(compose: dict[str, Any]) -> None:
    collector = compose["services"]["mast-otel-collector"]
    url = collector["environment"]["MAST_OTEL_STORE_URL"]
    assert url == "http://mast:${MAST_CLICKHOUSE_PASSWORD}@clickhouse:8123/mast"
    assert dict(bind_mounts(collector))["./collector/mast-otel.yaml"] == "/etc/mast-otel/mast-otel.yaml"
    gateway = (ROOT / "collector" / "otelcol-gateway.yaml").read_text(encoding="utf-8")
    assert "mast-otel-collector:4317" in gateway  # the gateway routes to the compose service by name


def test_clickhouse_users_writer_and_read_only_reader(compose: dict[str, Any]) -> None:
    mounts = dict(bind_mounts(compose["services"]["clickhouse"]))
    users_file = next(source for source in mounts if source.endswith(".xml"))
    root = ElementTree.parse(ROOT / users_file).getroot()
    users = root.find("users")
    assert users is not None
    writer, reader = users.find("mast"), users.find(READER_USER)
    assert writer is not None and reader is not None
    for user, env in ((writer, "MAST_CLICKHOUSE_PASSWORD"), (reader, READER_PASSWORD_ENV)):
        password = user.find("password")
        assert password is not None and password.get("from_env") == env and not (password.text or "").strip()
    assert [q.text for q in reader.iter("query")] == ["GRANT SELECT ON mast.*"]
    profile = root.find(f"profiles/{reader.findtext('profile')}")
    assert profile is not None and profile.findtext("readonly") == "1"
    environment = compose["services"]["clickhouse"]["environment"]
    assert {"MAST_CLICKHOUSE_PASSWORD", READER_PASSWORD_ENV} <= set(environment)
