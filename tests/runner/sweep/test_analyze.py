"""``llmbench analyze`` end to end against ``llmbench sim`` over real HTTP on 127.0.0.1.

The simulator decodes at most 4 sequences at once (``--max-num-seqs 4``), so from
concurrency 8 on half the requests queue for a whole request before their first token: p99
TTFT more than doubles and OTT stops growing. Throughput saturated at 4, so the knee must be
reported at 4 (OTT plateau rule, with the p99 TTFT rule firing later at 8) and, with a p99
TTFT limit between the two regimes, the max load under SLO at 4.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbench.cli import main
from llmbench.runner.sweep.analysis import ANALYZE_CSV, ANALYZE_JSON, TABLE1_COLUMNS
from llmbench.runner.sweep.run import CHECKPOINT
from tests.sim_process import running_sim

# TTFT 60 ms, 20 output tokens at 2 ms: one request takes ~100 ms, so a queued request's TTFT
# is >= 160 ms (2.7x) while unqueued ones stay near 60 ms. The margins (SLO 130 ms) absorb
# the scheduling spikes of a busy CI machine; p99 of a small sample is close to its maximum.
SIM_ARGS = ["--ttft-ms", "60", "--itl-ms", "2", "--max-num-seqs", "4"]
LOAD = [
    "--request-count", "16", "--warmup-request-count", "4",
    "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "20",
    "--extra-inputs", "ignore_eos:true",
]


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(SIM_ARGS) as url:
        yield url


def read_csv(path: Path) -> list[list[str]]:
    """Table 1 of ``analyze_export_genai_perf.csv`` (up to the empty row before the GPU table,
    which GenAI-Perf writes even without telemetry)."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    return rows[: rows.index([])]


def test_knee_and_max_under_slo_at_known_concurrency(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    rc = main(["analyze", "-u", sim_url, "--sweep-list", "1,2,4,8,16", *LOAD,
               "--slo", "ttft_p99:130", "--price-per-hour", "3.6", "--currency", "EUR",
               "--artifact-dir", str(out), "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 0, err
    data = json.loads((out / ANALYZE_JSON).read_text())
    assert data["knee"]["value"] == 4, data["knee_message"]
    # 8 adds no throughput over 4 (same 4 slots); its doubled TTFT is the later rule
    assert data["knee"]["rules"] == ["ott_plateau"], data["knee_message"]
    assert data["slo"]["best"] == "llmbench-sim-openai-chat-concurrency4"
    assert data["slo"]["first_failure"] == "llmbench-sim-openai-chat-concurrency8"
    assert "knee at concurrency 4 (OTT plateau rule): OTT grew " in err
    assert "from concurrency 4 to concurrency 8" in err
    assert "max OTT under SLO (ttft_p99 130):" in err and "at concurrency 4" in err
    assert "first failing point: concurrency 8 (p99 TTFT" in err

    rows = read_csv(out / ANALYZE_CSV)
    assert rows[0] == [*TABLE1_COLUMNS, "Goodput (req/s)", "Meets SLO",
                       "Cost per 1M Output Tokens (EUR)", "Knee", "Status"]
    assert [r[0] for r in rows[1:]] == [
        f"llmbench-sim-openai-chat-concurrency{c}" for c in (1, 2, 4, 8, 16)
    ]
    assert [r[1] for r in rows[1:]] == ["1", "2", "4", "8", "16"]
    # ISL: GenAI-Perf's measured p99 input length; Num Dataset Entries: its default 100
    assert all(r[2] == "16" and r[3] == "100" and r[-1] == "ok" for r in rows[1:])
    assert [r[-2] for r in rows[1:]] == ["", "", "yes", "", ""]  # the knee
    c4 = rows[3]
    assert c4[11] == "yes" and rows[4][11] == "no"
    assert c4[7] == "20.00"  # p99 output sequence length
    # cost per million output tokens = P / (OTT x 3600) x 1e6; P = 3.6 -> 1000 / OTT
    assert float(c4[12]) == pytest.approx(1000 / float(c4[8]), rel=1e-3)
    for c in (1, 2, 4, 8, 16):
        point = out / f"llmbench-sim-openai-chat-concurrency{c}"
        assert (point / "profile_export_genai_perf.json").exists()
        assert (point / "profile_export.json").exists()
    assert json.loads((out / CHECKPOINT).read_text())["complete"] is True


def test_resume_after_interruption_repeats_no_finished_point(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    load = [*LOAD]
    load[1] = "6"  # --request-count: only the bookkeeping matters here
    argv = ["analyze", "-u", sim_url, "--sweep-list", "1,2,4", *load,
            "--artifact-dir", str(out), "--no-plots"]
    assert main(argv) == 0
    # Simulate a sweep killed while concurrency 4 ran: its entry never reached the checkpoint.
    ckpt = json.loads((out / CHECKPOINT).read_text())
    del ckpt["points"]["llmbench-sim-openai-chat-concurrency4"]
    ckpt["complete"] = False
    (out / CHECKPOINT).write_text(json.dumps(ckpt))
    before = {c: (out / f"llmbench-sim-openai-chat-concurrency{c}" / "profile_export.json").stat()
              .st_mtime_ns for c in (1, 2, 4)}
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "resuming from" in err and "2 of 3 points already done" in err
    after = {c: (out / f"llmbench-sim-openai-chat-concurrency{c}" / "profile_export.json").stat()
             .st_mtime_ns for c in (1, 2, 4)}
    assert after[1] == before[1] and after[2] == before[2]
    assert after[4] != before[4]
    assert len(read_csv(out / ANALYZE_CSV)) == 4


def test_killed_process_resumes(sim_url: str, tmp_path: Path) -> None:
    """A real SIGKILL mid-sweep: the re-run skips what the checkpoint says finished."""
    out = tmp_path / "run"
    argv = ["llmbench", "analyze", "-u", sim_url, "--sweep-list", "1,2", "--request-count",
            "12", "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "20",
            "--extra-inputs", "ignore_eos:true", "--artifact-dir", str(out), "--no-plots"]
    exe = Path(os.environ.get("VIRTUAL_ENV", ".venv")) / "bin" / "llmbench"
    if not exe.exists():
        exe = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "llmbench"
    proc = subprocess.Popen([str(exe), *argv[1:]], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "[2/2]" in line:  # concurrency 1 is done and checkpointed
            proc.kill()
            break
    proc.wait(30)
    proc.stderr.close()
    ckpt = json.loads((out / CHECKPOINT).read_text())
    assert list(ckpt["points"]) == ["llmbench-sim-openai-chat-concurrency1"]
    point1 = out / "llmbench-sim-openai-chat-concurrency1"
    first = (point1 / "profile_export.json").stat().st_mtime_ns
    done = subprocess.run([str(exe), *argv[1:]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 of 2 points already done" in done.stderr
    assert (out / "llmbench-sim-openai-chat-concurrency1" / "profile_export.json").stat(
    ).st_mtime_ns == first


def test_ctrl_c_keeps_finished_points_and_exits_130(sim_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    exe = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "llmbench"
    proc = subprocess.Popen(
        [str(exe), "analyze", "-u", sim_url, "--sweep-list", "1,2", "--request-count", "16",
         "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "20",
         "--extra-inputs", "ignore_eos:true", "--artifact-dir", str(out), "--no-plots"],
        stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "[2/2]" in line:
            proc.send_signal(signal.SIGINT)
            break
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(30) == 130, err
    assert "run the same command again to resume" in err
    ckpt = json.loads((out / CHECKPOINT).read_text())
    assert list(ckpt["points"]) == ["llmbench-sim-openai-chat-concurrency1"]
    assert ckpt["complete"] is False
    assert len(read_csv(out / ANALYZE_CSV)) == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_down_point_recorded_with_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}"
    rc = main(["analyze", "-u", url, "-m", "m", "--no-preflight", "--sweep-list", "1,2",
               "--request-count", "2", "--synthetic-input-tokens-mean", "8",
               "--artifact-dir", str(out), "--no-plots"])
    assert rc == 1
    rows = read_csv(out / ANALYZE_CSV)
    assert len(rows) == 3
    assert all(r[-1].startswith("failed: ") and "127.0.0.1" in r[-1] for r in rows[1:]), rows
    err = capsys.readouterr().err
    assert "failed points: m-openai-chat-concurrency1, m-openai-chat-concurrency2" in err
    rc = main(["analyze", "-u", url, "-m", "m", "--no-preflight", "--sweep-list", "1,2",
               "--request-count", "2", "--on-point-failure", "stop", "--restart",
               "--artifact-dir", str(out), "--no-plots"])
    assert rc == 1
    assert len(read_csv(out / ANALYZE_CSV)) == 2


def test_unreachable_target_fails_before_any_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    rc = main(["analyze", "-u", url, "--sweep-list", "1", "--artifact-dir", str(tmp_path)])
    assert rc == 1
    assert "(--url)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep-type", "latency"], "--sweep-type 'latency': expected one of"),
        (["--sweep-range", "8:1"], "--sweep-range '8:1': start 8 is greater than end 1"),
        (["--sweep-range", "1:"], "--sweep-range '1:': expected start:end"),
        (["--sweep-list", "1,two"], "--sweep-list '1,two': 'two' is not a number"),
        (["--sweep-list", "1,2", "--sweep-range", "1:2"], "--sweep-range and --sweep-list"),
        (["--sweep-type", "request_rate"], "--sweep-type request_rate needs --sweep-range"),
        (["--concurrency", "4"], "--concurrency: the sweep sets it"),
        (["--slo", "ttft:5"], "--slo item 'ttft:5': expected KEY:VALUE"),
        (["--repetitions", "0"], "--repetitions: 0: must be at least 1"),
        (["--price-per-hour", "-1"], "--price-per-hour: -1.0: must be greater than 0"),
    ],
)
def test_bad_input_is_a_usage_error_naming_the_flag(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", "-u", "http://127.0.0.1:9", *args]) == 2
    assert message in capsys.readouterr().err


def test_manifest_errors_name_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("apiVersion: llmbench.io/v1alpha1\nkind: LLMBenchmark\nspec:\n"
                 "  target: {url: 'http://127.0.0.1:9'}\n  sweep: {type: concurrency, "
                 "range: '1:8', stopAfterKnee: yes-please}\n")
    assert main(["analyze", "-f", str(f)]) == 2
    assert "spec.sweep.stopAfterKnee: must be true or false" in capsys.readouterr().err
    f.write_text("{not yaml")
    assert main(["analyze", "-f", str(f)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_corrupt_checkpoint_is_reported(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / CHECKPOINT).write_text("{oops")
    rc = main(["analyze", "-u", sim_url, "--sweep-list", "1", *LOAD,
               "--artifact-dir", str(tmp_path), "--no-plots"])
    assert rc == 2
    assert "checkpoint.json is corrupt" in capsys.readouterr().err


def test_manifest_runs_locally_with_repetitions_and_request_rate(
    sim_url: str, tmp_path: Path
) -> None:
    f = tmp_path / "bench.yaml"
    f.write_text(f"""
apiVersion: llmbench.io/v1alpha1
kind: LLMBenchmark
metadata: {{name: rate-sweep}}
spec:
  target: {{url: "{sim_url}"}}
  workload: {{inputTokens: {{mean: 16}}, outputTokens: {{mean: 4}},
             extraInputs: {{ignore_eos: true}}}}
  load: {{mode: request_rate, requestRate: 1, requestCount: 8, maxConcurrency: 16}}
  sweep: {{type: request_rate, values: [40, 80]}}
  repetitions: 2
""")
    out = tmp_path / "out"
    assert main(["analyze", "-f", str(f), "--artifact-dir", str(out), "--no-plots"]) == 0
    rows = read_csv(out / ANALYZE_CSV)
    assert rows[0] == ["Config Name", "Request Rate", *TABLE1_COLUMNS[2:],
                       "Achieved Rate (req/s)", "Knee", "Repetitions", "Max Spread (%)",
                       "Unstable Metrics", "Status"]
    assert [r[0] for r in rows[1:]] == ["llmbench-sim-openai-chat-request_rate40.0",
                                         "llmbench-sim-openai-chat-request_rate80.0"]
    assert rows[1][1] == "40" and rows[1][12] == "2"
    assert float(rows[1][10]) == pytest.approx(40, rel=0.25)  # achieved vs target rate
    assert (out / "llmbench-sim-openai-chat-request_rate80.0-rep2").is_dir()
    data = json.loads((out / ANALYZE_JSON).read_text())
    assert set(data["points"][0]["spreads"]["ott"]) >= {"mean", "std", "min", "max",
                                                         "spread_pct", "unstable"}


def test_sequence_length_sweeps(sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                ) -> None:
    out = tmp_path / "isl"
    base = ["--request-count", "4", "--concurrency", "2", "--output-tokens-mean", "4",
            "--extra-inputs", "ignore_eos:true", "--no-plots"]
    assert main(["analyze", "-u", sim_url, "--sweep-type", "input_sequence_length",
                 "--sweep-list", "8,32", *base, "--artifact-dir", str(out)]) == 0
    assert "knee: not applicable to input_sequence_length sweeps" in capsys.readouterr().err
    rows = read_csv(out / ANALYZE_CSV)
    assert rows[0] == [*TABLE1_COLUMNS, "Status"]
    assert [(r[0], r[1], r[2]) for r in rows[1:]] == [
        ("llmbench-sim-openai-chat-concurrency2-isl8", "2", "8"),
        ("llmbench-sim-openai-chat-concurrency2-isl32", "2", "32"),
    ]
    out = tmp_path / "osl"
    assert main(["analyze", "-u", sim_url, "--sweep-type", "output_sequence_length",
                 "--sweep-range", "2:6:4", *base, "--synthetic-input-tokens-mean", "8",
                 "--artifact-dir", str(out)]) == 0
    rows = read_csv(out / ANALYZE_CSV)
    assert rows[0] == [*TABLE1_COLUMNS, "OSL", "Status"]
    assert [r[10] for r in rows[1:]] == ["2", "6"]


@pytest.fixture()
def dcgm_url() -> Iterator[str]:
    """A simulated dcgm-exporter (llmbench/sim/dcgm.py) on its own loop thread."""
    import asyncio
    import threading

    from llmbench.sim.dcgm import DcgmSimState, DcgmSimulator, serve_dcgm

    loop = asyncio.new_event_loop()
    sim = DcgmSimulator(DcgmSimState(n_gpus=2), load=lambda: 0.5)
    server = loop.run_until_complete(serve_dcgm(sim, port=0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def test_gpu_telemetry_adds_table_2_and_energy_per_token(
    sim_url: str, dcgm_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    assert main(["analyze", "-u", sim_url, "--sweep-list", "2,4", "--request-count", "8",
                 "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "8",
                 "--extra-inputs", "ignore_eos:true", "--server-metrics-url", dcgm_url,
                 "--telemetry-interval", "0.1", "--artifact-dir", str(out), "--no-plots"]) == 0
    text = (out / ANALYZE_CSV).read_text()
    table1, table2 = text.split("\n\n")
    rows1 = list(csv.reader(table1.splitlines()))
    assert rows1[0][-3:] == ["Energy per Output Token (J)", "Knee", "Status"]
    assert all(float(r[-3]) > 0 for r in rows1[1:])
    rows2 = list(csv.reader(table2.splitlines()))
    # GenAI-Perf's GPU table: GPU by GPU, each with every run
    assert rows2[0] == ["Config Name", "GPU", "p99 GPU Power Usage (W)",
                        "p99 GPU Energy Consumption (MJ)", "p99 GPU Utilization (%)",
                        "p99 GPU Memory Used (GB)", "Avg. GPU Power Limit (W)",
                        "Avg. GPU Total Memory (GB)"]
    assert [(r[0], r[1]) for r in rows2[1:]] == [
        ("llmbench-sim-openai-chat-concurrency2", "gpu0"),
        ("llmbench-sim-openai-chat-concurrency4", "gpu0"),
        ("llmbench-sim-openai-chat-concurrency2", "gpu1"),
        ("llmbench-sim-openai-chat-concurrency4", "gpu1"),
    ]
    assert all(float(r[2]) > 300 for r in rows2[1:])  # 70 + 580 x 0.5 W at load 0.5


def test_shipped_sim_example_runs_locally(sim_url: str, tmp_path: Path) -> None:
    """examples/llmbenchmark-sim.yaml, pointed at the test's sim and shortened, runs as is."""
    import yaml

    example = Path(__file__).resolve().parents[3] / "examples" / "llmbenchmark-sim.yaml"
    doc = yaml.safe_load(example.read_text())
    doc["spec"]["target"]["url"] = sim_url
    doc["spec"]["load"].update(requestCount=8, warmupRequestCount=2)
    doc["spec"]["sweep"]["range"] = "1:2"
    f = tmp_path / "example.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["analyze", "-f", str(f), "--artifact-dir", str(out), "--no-plots"]) == 0
    data = json.loads((out / ANALYZE_JSON).read_text())
    assert [p["name"] for p in data["points"]] == [
        "llmbench-sim-openai-chat-concurrency1", "llmbench-sim-openai-chat-concurrency2"]
    assert data["cost"] == {"price_per_hour": 2.5, "currency": "EUR"}
    assert data["slo"]["limits"] == {"ttft_p99": 150, "itl_p99": 20}
