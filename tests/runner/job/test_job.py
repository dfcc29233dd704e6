"""``llmbench job`` end to end against ``llmbench sim`` on 127.0.0.1, with a folder as store.

The sim requires an API key (``--api-key``) and serves two simulated GPUs of pod ``vllm-0``
in dcgm-exporter's format, so a run shows that the key reaches the target and nothing else,
and that the operator's telemetry context (exporter URL, target pods) is applied. The store
is the folder stand-in of the results ConfigMap (same keys); the ConfigMap client itself is
tested in test_store.py and against a real API server in tests/e2e/test_runner_store.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmbench.api import Spec
from llmbench.api.job import (
    CHECKPOINT_KEY,
    CONTEXT_KEY,
    DIGEST_KEY,
    ENV_API_KEY,
    PROGRESS_KEY,
    SPEC_KEY,
    SUMMARY_KEY,
    TERMINATION_LIMIT,
    RunContext,
    point_key,
    point_name_of,
)
from llmbench.api.results import PointResult, read_result, validate_result
from llmbench.api.status import RunDigest
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON, PROFILE_EXPORT
from llmbench.runner.job.main import ROUTE_WAIT_S, run_job, set_aside
from llmbench.runner.job.store import ConfigMapStore, DirStore
from llmbench.runner.report.html import REPORT_HTML
from llmbench.runner.sweep.analysis import ANALYZE_CSV
from llmbench.runner.sweep.run import CHECKPOINT, point_name
from tests.sim_process import running_sim

KEY = "sk-llmbench-test-9f8e7d6c5b4a"
POD, NS = "vllm-0", "llm"
SIM_ARGS = ["--ttft-ms", "20", "--itl-ms", "8", "--api-key", KEY, "--dcgm", "--dcgm-gpus", "2",
            "--dcgm-pod", POD, "--dcgm-namespace", NS]
REQUESTS, WARMUP = 8, 2
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(SIM_ARGS) as url:
        yield url


def spec_doc(values: list[int]) -> dict[str, Any]:
    """The benchmark's spec as the operator stores it; its URL is not the one to use (the
    context's is), to show the context wins."""
    return {
        "target": {"url": "http://127.0.0.1:9", "apiKeySecretRef": {"name": "s", "key": "k"}},
        "workload": {"inputTokens": {"mean": 16}, "outputTokens": {"mean": 20},
                     "extraInputs": {"ignore_eos": True}},
        "load": {"requestCount": REQUESTS, "warmupRequestCount": WARMUP},
        "sweep": {"type": "concurrency", "values": [float(v) for v in values]},
        "slo": {"ttftP99Ms": 5000},
    }


def point_names(values: tuple[int, ...] = (1, 2, 4)) -> list[str]:
    """The sweep's own point folder names (``<model>-<endpoint>-concurrency<N>``)."""
    spec = Spec.from_manifest(spec_doc(list(values)))
    return [point_name(spec, "llmbench-sim", "concurrency", float(v), 1) for v in values]


NAMES = point_names()


def context(url: str, **kw: Any) -> RunContext:
    return RunContext(
        benchmark="b", namespace=NS, run=2, url=url, api_key_env=ENV_API_KEY,
        dcgm_urls=[f"{url}/dcgm/metrics"], target_pods=[POD], target_namespace=NS, **kw,
    )


def seed(directory: Path, url: str, values: tuple[int, ...] = (1, 2, 4), **kw: Any) -> DirStore:
    store = DirStore(directory)
    store.write({
        SPEC_KEY: json.dumps(spec_doc(list(values))),
        CONTEXT_KEY: context(url, **kw).model_dump_json(by_alias=True, exclude_none=True),
    })
    return store


class RecordingStore(DirStore):
    """A folder store that also keeps every write it was given, in order."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.writes: list[dict[str, str]] = []

    def write(self, updates: dict[str, str]) -> None:
        self.writes.append(dict(updates))
        super().write(updates)


def files_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in root.rglob("*") if p.is_file())


def assert_key_nowhere(*roots: Path) -> None:
    seen = 0
    for path in files_under(*roots):
        seen += 1
        assert KEY.encode() not in path.read_bytes(), f"the API key leaked into {path}"
    assert seen > 0


def sim_next_id(url: str) -> int:
    return int(httpx.get(f"{url}/sim/records?since=1000000000").json()["next_request_id"])


def sim_requests_since(url: str, since: int) -> int:
    """Load requests the sim served since request id ``since`` (not the one-token probes)."""
    records = httpx.get(f"{url}/sim/records?since={since}").json()["records"]
    return sum(1 for r in records if r["max_tokens"] != 1)


def test_each_point_is_one_write_with_digest_checkpoint_and_csv(
    sim_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_API_KEY, KEY)
    seed(tmp_path / "store", sim_url)
    store = RecordingStore(tmp_path / "store")
    art, term = tmp_path / "art", tmp_path / "termination-log"
    rc = run_job(store, art, termination_log=term, stop=asyncio.Event(), runner_node="node-a")
    assert rc == 0
    assert len(store.writes) == 4  # one per point, then the final one
    for i, write in enumerate(store.writes[:3]):
        assert set(write) == {point_key(NAMES[i]), CHECKPOINT_KEY, DIGEST_KEY, SUMMARY_KEY,
                              PROGRESS_KEY}
        assert write[PROGRESS_KEY] is None  # the ended point's live record goes with it
        d = RunDigest.model_validate_json(write[DIGEST_KEY])
        assert (d.run, d.done, d.total, d.finished) == (2, i + 1, 3, False)
        assert [p.name for p in d.points] == NAMES[: i + 1]
        assert sorted(json.loads(write[CHECKPOINT_KEY])["points"]) == sorted(NAMES[: i + 1])
        # the point as the store holds it reads back as the point's own result
        stored = validate_result(PointResult, json.loads(write[point_key(NAMES[i])]), "store")
        local = read_result(PointResult, art / NAMES[i] / GENAI_PERF_JSON)
        assert stored == local
    final = store.writes[3]
    assert set(final) == {CHECKPOINT_KEY, DIGEST_KEY, SUMMARY_KEY, PROGRESS_KEY}
    assert final[PROGRESS_KEY] is None  # no live record outlives the run
    assert "\r" not in final[SUMMARY_KEY]  # LF line ends, as status.summaryCSV shows them
    d = RunDigest.model_validate_json(final[DIGEST_KEY])
    assert (d.done, d.finished, d.failed, d.runner_node) == (3, True, None, "node-a")
    for p in d.points:
        assert p.state == "Succeeded" and p.ott and p.ttft_p99_ms and p.slo_met is True
        assert p.gpus == 2 and p.gpu_power_w is not None  # vllm-0's two GPUs, via the context
    assert d.knee is not None and d.knee.message
    assert d.max_under_slo is not None and d.max_under_slo.value is not None
    # summary.csv is `llmbench analyze`'s CSV of the same points, byte for byte
    data = store.read()
    assert data[SUMMARY_KEY] == (art / ANALYZE_CSV).read_text()
    # the store's checkpoint is the folder's, built from the result in memory, not read back
    assert data[CHECKPOINT_KEY] == (art / CHECKPOINT).read_text()
    rows = data[SUMMARY_KEY].splitlines()
    assert rows[0].startswith("Config Name,") and [r.split(",")[0] for r in rows[1:4]] == NAMES
    msg = term.read_text()
    assert len(msg.encode()) <= TERMINATION_LIMIT
    assert RunDigest.model_validate_json(msg).finished
    assert_key_nowhere(tmp_path / "store", art, term)


def test_sigterm_then_resume_repeats_no_finished_point(sim_url: str, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    seed(store_dir, sim_url)
    env = {**os.environ, ENV_API_KEY: KEY}
    first, t1 = tmp_path / "pod1", tmp_path / "term1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench", "job", "--store-dir", str(store_dir),
         "--artifact-dir", str(first), "--termination-log", str(t1)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    digest = store_dir / DIGEST_KEY
    try:
        for _ in range(1200):  # bounded: at most ~2 minutes on a slow machine
            if proc.poll() is not None:
                break
            if digest.exists() and RunDigest.model_validate_json(digest.read_text()).done >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the job ended before it could be interrupted"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    d1 = RunDigest.model_validate_json(t1.read_text())
    assert not d1.finished and 1 <= d1.done < 3
    finished = {n for k in DirStore(store_dir).read() if (n := point_name_of(k)) is not None}
    assert finished == {p.name for p in d1.points} and finished < set(NAMES)

    # a new pod: an empty artefact folder, the same store
    mark = sim_next_id(sim_url)
    second, t2 = tmp_path / "pod2", tmp_path / "term2"
    old = os.environ.get(ENV_API_KEY)
    os.environ[ENV_API_KEY] = KEY
    try:
        rc = run_job(DirStore(store_dir), second, termination_log=t2, stop=asyncio.Event())
    finally:
        if old is None:
            del os.environ[ENV_API_KEY]
        else:
            os.environ[ENV_API_KEY] = old
    assert rc == 0
    ran = {p.name for p in second.iterdir() if (p / PROFILE_EXPORT).exists()}
    assert ran == set(NAMES) - finished
    for name in finished:  # restored from the store, not measured again
        assert (second / name / GENAI_PERF_JSON).exists()
    # the server saw exactly the requests of the points that had not finished
    # (the preflight's one-token probes left out: they load nothing)
    assert sim_requests_since(sim_url, mark) == len(ran) * (REQUESTS + WARMUP)
    d2 = RunDigest.model_validate_json(DirStore(store_dir).read()[DIGEST_KEY])
    assert (d2.done, d2.finished, d2.failed) == (3, True, None)
    assert [p.name for p in d2.points] == NAMES
    log = tmp_path / "stderr.log"
    log.write_text(out + err)
    assert_key_nowhere(store_dir, first, second, t1, t2, log)


def test_unusable_runs_fail_with_the_reason(
    sim_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_API_KEY, KEY)
    cases = [
        # a refused port is tried again for ROUTE_WAIT_S first (a Service not routed yet)
        ("down", lambda d: seed(d, "http://127.0.0.1:9"), "cannot reach http://127.0.0.1:9"),
        ("no-context", lambda d: DirStore(d).write({SPEC_KEY: "{}"}),
         f"has no {CONTEXT_KEY}"),
        ("bad-spec", lambda d: seed(d, sim_url).write({SPEC_KEY: '{"target": {}}'}),
         f"{SPEC_KEY} in directory"),
    ]
    for name, make, reason in cases:
        store_dir = tmp_path / name
        make(store_dir)
        term = tmp_path / f"{name}.term"
        rc = run_job(DirStore(store_dir), tmp_path / f"{name}.art", termination_log=term,
                     stop=asyncio.Event())
        assert rc == 1, name
        for text in (DirStore(store_dir).read()[DIGEST_KEY], term.read_text()):
            d = RunDigest.model_validate_json(text)
            assert d.finished and d.failed is not None and reason in d.failed, (name, d.failed)
            if name == "down":
                assert f"tried for {ROUTE_WAIT_S:g} s" in d.failed, d.failed
    monkeypatch.delenv(ENV_API_KEY)
    store_dir = tmp_path / "no-key"
    seed(store_dir, sim_url)
    rc = run_job(DirStore(store_dir), tmp_path / "no-key.art", termination_log=None,
                 stop=asyncio.Event())
    d = RunDigest.model_validate_json(DirStore(store_dir).read()[DIGEST_KEY])
    assert rc == 1 and d.failed is not None and ENV_API_KEY in d.failed


class RefusingApi:
    """An API server that lets the runner read its ConfigMap and refuses every write."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data
        self.patches = 0
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._send(200, {"kind": "ConfigMap", "data": api.data})

            def do_PATCH(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with api.lock:
                    api.patches += 1
                self._send(403, {"kind": "Status", "message": "configmaps is forbidden"})

        return Handler


def test_refused_writes_go_to_the_termination_message_and_the_sweep_goes_on(
    sim_url: str, tmp_path: Path, serve_http: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_API_KEY, KEY)
    seeded = seed(tmp_path / "seed", sim_url, values=(1, 2)).read()
    api = RefusingApi(seeded)
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text("t")
    store = ConfigMapStore("b-run-2", NS, server=serve_http(api.handler()),
                           service_account_dir=tmp_path / "sa")
    term = tmp_path / "term"
    rc = run_job(store, tmp_path / "art", termination_log=term, stop=asyncio.Event())
    assert rc == 0 and api.patches == 3  # 403 is not retried: two points, then the final
    d = RunDigest.model_validate_json(term.read_text())
    assert (d.done, d.total, d.finished) == (2, 2, True)
    assert [p.state for p in d.points] == ["Succeeded", "Succeeded"]


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llmbench.cli import main

    assert main(["job"]) == 2
    assert "--configmap and --namespace required (or --store-dir DIR)" in capsys.readouterr().err
    assert main(["job", "--store-dir", str(tmp_path), "--configmap", "x"]) == 2
    assert "--store-dir replaces --configmap/--server" in capsys.readouterr().err


def test_point_text_is_compact_and_sheds_series_over_budget() -> None:
    from llmbench.runner.job.main import point_text

    data = Path(__file__).resolve().parents[1] / "point" / "data" / "telemetry_goodput.json"
    summary = read_result(PointResult, data)
    full = point_text(summary, 10**9)
    assert validate_result(PointResult, json.loads(full), "store") == summary
    assert "\n" not in full and len(full) < len(data.read_text())
    slim = point_text(summary, 1000)
    back = validate_result(PointResult, json.loads(slim), "store")
    assert back.telemetry is not None and summary.telemetry is not None
    assert all(g.series.t_s == [] for g in back.telemetry.gpus.values())
    assert back.telemetry.gpu_rows() == summary.telemetry.gpu_rows()
    assert back.output_token_throughput == summary.output_token_throughput


def test_a_persist_dir_gets_the_run_folder_as_analyze_lays_it_out(
    sim_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``spec.artifacts.pvc``: the run's whole folder lands in the persist dir (the claim),
    report included; a later fresh run under the same folder never resumes from it."""
    monkeypatch.setenv(ENV_API_KEY, KEY)
    keep = tmp_path / "pvc" / "b" / "run-2"
    store = seed(tmp_path / "store", sim_url, (1, 2))
    rc = run_job(store, tmp_path / "art", termination_log=None, stop=asyncio.Event(),
                 persist_dir=keep)
    assert rc == 0
    data = store.read()
    assert (keep / ANALYZE_CSV).read_text() == data[SUMMARY_KEY]
    for name in NAMES[:2]:
        assert read_result(PointResult, keep / name / GENAI_PERF_JSON) == validate_result(
            PointResult, json.loads(data[point_key(name)]), "store")
        assert (keep / name / PROFILE_EXPORT).stat().st_size > 0  # every request's record
    page = (keep / REPORT_HTML).read_text()
    assert "<html" in page.lower()
    # the summary table holds the points only; the GPU table (the sim's two GPUs) follows it
    summary, _, gpus = page.partition("<h2>GPU telemetry</h2>")
    assert "GPU Power Usage" not in summary and "GPU Power Usage" in gpus
    assert not list(files_under(tmp_path / "art"))  # the emptyDir holds nothing of the run
    assert_key_nowhere(keep)
    # The benchmark is deleted and made again: run 2 again, a fresh store, the same folder.
    mark = sim_next_id(sim_url)
    again = seed(tmp_path / "store2", sim_url, (1,))
    assert run_job(again, tmp_path / "art", termination_log=None, stop=asyncio.Event(),
                   persist_dir=keep) == 0
    assert sim_requests_since(sim_url, mark) == REQUESTS + WARMUP  # measured, not resumed
    (old,) = keep.parent.glob("run-2.replaced-*")
    assert (old / NAMES[1] / GENAI_PERF_JSON).exists()  # the first run's files, kept aside
    assert sorted(p.name for p in keep.iterdir() if p.is_dir()) == [NAMES[0], "plots"]


def test_set_aside_moves_only_a_foreign_folder(tmp_path: Path) -> None:
    run = tmp_path / "run-1"
    assert set_aside(run, fresh=True, stamp="T") is None  # nothing there
    run.mkdir()
    assert set_aside(run, fresh=True, stamp="T") is None  # empty: a fresh claim
    (run / "checkpoint.json").write_text("{}")
    assert set_aside(run, fresh=False, stamp="T") is None  # a resume: this run's own files
    assert set_aside(run, fresh=True, stamp="T") == tmp_path / "run-1.replaced-T"
    run.mkdir()
    (run / "x").write_text("")
    assert set_aside(run, fresh=True, stamp="T") == tmp_path / "run-1.replaced-T-2"
    assert not run.exists()


def test_an_unwritable_persist_dir_fails_the_run_naming_the_field(tmp_path: Path) -> None:
    blocker = tmp_path / "pvc"
    blocker.write_text("a file where the claim's folder should be")
    store = seed(tmp_path / "store", "http://127.0.0.1:9", (1,))
    term = tmp_path / "termination-log"
    rc = run_job(store, tmp_path / "art", termination_log=term, stop=asyncio.Event(),
                 persist_dir=blocker / "b" / "run-2")
    assert rc == 1
    digest = RunDigest.model_validate_json(store.read()[DIGEST_KEY])
    assert digest.failed is not None and digest.failed.startswith("spec.artifacts.pvc: cannot ")
    assert "fsGroup" in digest.failed
