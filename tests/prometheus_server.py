"""Debian's real Prometheus and promtool for the tests of the shipped alert rules, the
ServiceMonitor and the Grafana dashboard.

:func:`binary` finds ``prometheus`` / ``promtool`` (``hack/cluster/build.sh`` installs the
Debian package ``prometheus``, without starting its system service) and fails, never skips,
naming that command when they are missing. :func:`running_prometheus` starts the server itself
with the test's own config, a private data folder and a free loopback port, and stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = [
    "DASHBOARD",
    "Prometheus",
    "binary",
    "dashboard_queries",
    "promtool",
    "rule_groups",
    "running_prometheus",
    "service_monitor_job",
]

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "charts" / "llmbench-operator" / "files" / "dashboards" / "llmbench.json"
#: Grafana's built-in variables, as a 1 h dashboard range would set them.
GRAFANA_VARIABLES = {"$__range": "1h", "$__rate_interval": "1m", "$__interval": "15s"}
INSTALL = ("bash hack/cluster/build.sh (as root: it installs the Debian package 'prometheus', "
           "or: apt-get install -y --no-install-recommends prometheus)")


def binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; the test fails naming the install command."""
    path = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/local/bin")
    if path is None:
        pytest.fail(f"{name} is not installed: run {INSTALL}", pytrace=False)
    return path


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs promtool; the caller asserts on its exit code and output."""
    return subprocess.run([binary("promtool"), *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def rule_groups(path: Path) -> dict[str, Any]:
    """A PrometheusRule manifest's ``spec`` (its ``groups``): the rule file Prometheus loads."""
    doc = yaml.safe_load(path.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    return {"groups": doc["spec"]["groups"]}


def service_monitor_job(
    monitor: dict[str, Any], service: dict[str, Any], targets: list[str], **labels: str
) -> dict[str, Any]:
    """A static scrape job with the ServiceMonitor's endpoint settings (path, scheme,
    honorLabels, interval, timeout) for ``targets`` (the addresses of the Service's endpoints
    on the endpoint's named port), labelled the way the Prometheus Operator labels them
    (``namespace``, ``service``, ``endpoint``, ``job``: the Service's name) plus ``labels``."""
    (endpoint,) = monitor["spec"]["endpoints"]
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert endpoint["port"] in ports, (endpoint, ports)
    meta = service["metadata"]
    return {
        "job_name": f"serviceMonitor/{monitor['metadata']['namespace']}/"
                    f"{monitor['metadata']['name']}/0",
        "honor_labels": endpoint["honorLabels"],
        "metrics_path": endpoint["path"],
        "scheme": endpoint["scheme"],
        "scrape_interval": endpoint["interval"],
        "scrape_timeout": endpoint["scrapeTimeout"],
        "static_configs": [{"targets": targets, "labels": {
            "job": meta["name"], "namespace": meta["namespace"], "service": meta["name"],
            "endpoint": endpoint["port"], **labels}}],
    }


def dashboard_queries(**variables: str) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query in the Grafana dashboard, with its template
    variables (``$benchmark_namespace`` ...) and Grafana's built-in ones replaced."""
    doc = json.loads(DASHBOARD.read_text())
    out = []
    for panel in doc["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            names = {**GRAFANA_VARIABLES, **{f"${k}": v for k, v in variables.items()}}
            for name in sorted(names, key=len, reverse=True):  # $benchmark_namespace first
                expr = expr.replace(name, names[name])
            assert "$" not in expr, (panel["title"], expr)
            out.append((panel["title"], expr))
    return out


class Prometheus:
    """One running server: its base URL, the HTTP API and its log for diagnostics."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the JSON's ``data`` (an error status fails with its message)."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
                doc = json.load(r)
        except urllib.error.HTTPError as exc:
            doc = json.load(exc)
        assert doc.get("status") == "success", (path, params, doc)
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (or scalar, as one row)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def wait(self, expr: str, what: str, seconds: float = 90,
             diag: Callable[[], str] | None = None) -> list[dict[str, Any]]:
        """The query's rows once it has any (new samples arrive with each scrape); fails after
        ``seconds`` with Prometheus' log and ``diag()`` (e.g. the operator's)."""
        deadline = time.monotonic() + seconds
        while True:
            rows = self.query(expr)
            if rows:
                return rows
            if time.monotonic() > deadline:
                extra = f"\n--- diagnostics ---\n{diag()}" if diag is not None else ""
                pytest.fail(f"{what}: `{expr}` is empty after {seconds:.0f}s\n"
                            f"--- prometheus ---\n{self.tail()}{extra}")
            time.sleep(0.5)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_prometheus(config: dict[str, Any], workdir: Path) -> Iterator[Prometheus]:
    """``prometheus`` with ``config`` (a dict, written as YAML) and its data under ``workdir``,
    listening on a free 127.0.0.1 port; stopped (SIGTERM, then SIGKILL) when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    check = promtool("check", "config", str(cfg))
    assert check.returncode == 0, check.stdout + check.stderr
    port = _free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [binary("prometheus"), f"--config.file={cfg}",
             f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d",
             "--web.enable-lifecycle"],
            stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env={**os.environ},
        )
    server = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not become ready:\n{server.tail()}", pytrace=False)
            time.sleep(0.3)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
