"""The results stores: a folder, and the ConfigMap client over HTTP on 127.0.0.1.

The ConfigMap client is exercised against a small HTTP server speaking the API server's
ConfigMap GET and merge-patch PATCH (tests/e2e/test_runner_store.py runs it against a real
kube-apiserver with RBAC). Backoff sleeps are recorded instead of slept.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from llmbench.runner.job.main import too_large
from llmbench.runner.job.store import ConfigMapStore, DirStore, StoreError

TOKEN = "sa-token-must-not-leak-0123456789"
PATH = "/api/v1/namespaces/ns/configmaps/run-1"


def test_dir_store_round_trip(tmp_path: Path) -> None:
    store = DirStore(tmp_path / "s")
    store.write({"spec.json": "{}", "point.a-1.json": "x"})
    store.write({"spec.json": '{"a":1}', "digest.json": "d"})
    assert store.read() == {"digest.json": "d", "point.a-1.json": "x", "spec.json": '{"a":1}'}
    with pytest.raises(StoreError, match="not a valid ConfigMap key"):
        store.write({"../escape": "x"})
    with pytest.raises(StoreError, match="not a directory"):
        DirStore(tmp_path / "missing").read()


class FakeApi:
    """One ConfigMap behind GET and merge-patch PATCH; ``fail`` answers come first."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {"spec.json": "{}"}
        self.fail: list[tuple[int, dict[str, str]]] = []
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        self.patches: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any],
                      headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with api.lock:
                    api.calls.append((self.command, self.path, dict(self.headers)))
                    if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                        self._send(401, {"kind": "Status", "message": "Unauthorized"})
                        return
                    if api.fail:
                        status, headers = api.fail.pop(0)
                        self._send(status, {"kind": "Status", "message": f"injected {status}"},
                                   headers)
                        return
                    if self.path != PATH:
                        self._send(404, {"kind": "Status",
                                         "message": f'configmaps "{self.path}" not found'})
                        return
                    if self.command == "PATCH":
                        assert self.headers["Content-Type"] == "application/merge-patch+json"
                        patch = json.loads(body)
                        api.patches.append(patch)
                        for key, value in patch["data"].items():  # RFC 7386: null removes
                            if value is None:
                                api.data.pop(key, None)
                            else:
                                api.data[key] = value
                    self._send(200, {"kind": "ConfigMap", "data": dict(api.data)})

            do_GET = _handle
            do_PATCH = _handle

        return Handler


@pytest.fixture
def sa_dir(tmp_path: Path) -> Path:
    d = tmp_path / "sa"
    d.mkdir()
    (d / "token").write_text(TOKEN + "\n")
    return d


def store_for(url: str, sa_dir: Path, sleeps: list[float], name: str = "run-1",
              attempts: int = 4) -> ConfigMapStore:
    return ConfigMapStore(name, "ns", server=url, service_account_dir=sa_dir, attempts=attempts,
                          backoff_s=0.5, max_backoff_s=2.0, sleep=sleeps.append)


def test_read_and_merge_patch(serve_http: Any, sa_dir: Path) -> None:
    api = FakeApi()
    sleeps: list[float] = []
    store = store_for(serve_http(api.handler()), sa_dir, sleeps)
    assert store.read() == {"spec.json": "{}"}
    store.write({"digest.json": "{}", "point.a.json": "p"})
    assert api.data == {"spec.json": "{}", "digest.json": "{}", "point.a.json": "p"}
    assert [c[0] for c in api.calls] == ["GET", "PATCH"] and sleeps == []


def test_delete_is_one_merge_patch_of_nulls(serve_http: Any, sa_dir: Path) -> None:
    api = FakeApi()
    sleeps: list[float] = []
    store = store_for(serve_http(api.handler()), sa_dir, sleeps)
    store.write({"shard.p.ready.1": "{}", "shard.p.start": "{}", "point.a.json": "p"})
    store.delete(["shard.p.ready.1", "shard.p.start", "shard.p.gone"])
    assert api.patches[-1] == {"data": {"shard.p.ready.1": None, "shard.p.start": None,
                                        "shard.p.gone": None}}
    assert api.data == {"spec.json": "{}", "point.a.json": "p"}
    store.delete([])  # nothing to remove: no call
    assert [c[0] for c in api.calls] == ["PATCH", "PATCH"]
    with pytest.raises(StoreError, match="not a valid ConfigMap key"):
        store.delete(["a/b"])


def _write_keys(directory: str, worker: int) -> None:
    store = DirStore(Path(directory))
    for k in range(40):
        store.write({f"shard.p.rec.0.{worker}": f"{worker}-{k}" * 200})
        store.read()


def test_dir_store_takes_several_writers_and_deletes(tmp_path: Path) -> None:
    """Processes writing different keys of one folder (local shards) never see a torn or
    foreign value, and a key deleted while listed is simply absent."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_keys, args=(str(tmp_path), w)) for w in range(3)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(60)
    assert [pr.exitcode for pr in procs] == [0, 0, 0]
    store = DirStore(tmp_path)
    data = store.read()
    assert data == {f"shard.p.rec.0.{w}": f"{w}-39" * 200 for w in range(3)}
    store.delete(["shard.p.rec.0.0", "shard.p.rec.0.9"])
    assert sorted(store.read()) == ["shard.p.rec.0.1", "shard.p.rec.0.2"]
    assert not list(tmp_path.glob("*.tmp"))


def test_transient_answers_are_retried_with_bounded_backoff(
    serve_http: Any, sa_dir: Path
) -> None:
    api = FakeApi()
    api.fail = [(409, {}), (503, {}), (429, {"Retry-After": "30"})]
    sleeps: list[float] = []
    store = store_for(serve_http(api.handler()), sa_dir, sleeps)
    store.write({"digest.json": "1"})
    assert api.data["digest.json"] == "1" and len(api.calls) == 4
    assert len(sleeps) == 3 and all(0 < s <= 2.0 for s in sleeps)
    assert sleeps[2] == 2.0  # Retry-After honoured up to the bound


def test_errors_name_the_configmap_and_status_never_the_token(
    serve_http: Any, sa_dir: Path
) -> None:
    api = FakeApi()
    url = serve_http(api.handler())
    sleeps: list[float] = []
    api.fail = [(403, {})]
    with pytest.raises(StoreError) as err:
        store_for(url, sa_dir, sleeps).write({"digest.json": "1"})
    assert err.value.status == 403 and sleeps == [] and len(api.calls) == 1
    assert str(err.value) == "ConfigMap ns/run-1: PATCH answered 403 Forbidden: injected 403"
    api.fail = [(500, {})] * 4
    with pytest.raises(StoreError) as err:
        store_for(url, sa_dir, sleeps).read()
    assert err.value.status == 500 and len(sleeps) == 3
    assert "ConfigMap ns/run-1: GET failed after 4 attempts; last: 500" in str(err.value)
    with pytest.raises(StoreError) as err:
        store_for(url, sa_dir, sleeps, name="other").read()
    assert "ConfigMap ns/other: GET answered 404 Not Found" in str(err.value)
    assert TOKEN not in str(err.value)


def test_connection_errors_are_retried_then_reported(sa_dir: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    store = store_for(f"http://127.0.0.1:{port}", sa_dir, sleeps, attempts=3)
    with pytest.raises(StoreError) as err:
        store.read()
    assert err.value.status is None and len(sleeps) == 2
    assert "ConfigMap ns/run-1: GET failed after 3 attempts; last: ConnectError" in str(err.value)


def test_missing_credentials_and_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    store = ConfigMapStore("run-1", "ns", service_account_dir=tmp_path)
    with pytest.raises(StoreError, match="KUBERNETES_SERVICE_HOST is not set"):
        store.read()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    with pytest.raises(StoreError, match=r"CA .*ca\.crt is missing"):
        store.read()
    (tmp_path / "ca.crt").write_text("not a certificate")
    with pytest.raises(StoreError, match="cannot load the CA"):
        store.read()
    store = ConfigMapStore("run-1", "ns", server="http://127.0.0.1:9",
                           service_account_dir=tmp_path / "none")
    with pytest.raises(StoreError, match="cannot read the service-account token"):
        store.read()


def test_a_write_refused_for_size_is_told_from_other_refusals() -> None:
    """What the API server answers to a ConfigMap over 1 MiB (422 Invalid, or etcd's 413) ends
    the run; a 403 or a conflict does not read as one."""
    assert too_large(StoreError("ConfigMap llm/b-run-1: PATCH answered 422 Unprocessable Entity: "
                                'ConfigMap "b-run-1" is invalid: []: Too long: must have at most '
                                "1048576 bytes", 422))
    assert too_large(StoreError("PATCH answered 413: etcdserver: request is too large", 413))
    assert not too_large(StoreError("PATCH answered 403 Forbidden: configmaps is forbidden", 403))
    assert not too_large(StoreError("PATCH answered 422: data[x]: Invalid value: key", 422))
    assert not too_large(StoreError("connection refused: request is too large", None))
