"""GenAI-Perf's own command lines run unchanged against ``llmbench sim`` over 127.0.0.1.

Every ``genai-perf profile``/``analyze`` command line of GenAI-Perf 0.0.16's README and
tutorial (``genai-perf/README.md``, ``genai-perf/docs/tutorial.md``, plus the goodput doc's)
and of the seed article (``shared/seeds/``) is listed verbatim. The test swaps the program name
for ``llmbench``, points ``--url`` at a sim serving the command's model, shrinks the request
counts and sweeps (the only edits), and expects a measured run: exit code 0, never a usage
error. Not listed: ``genai-perf config``/``create-template`` (GenAI-Perf's YAML config files;
``llmbench analyze -f`` runs our manifests instead). The README's ``--input-file payload:``
trace replay runs unchanged too, on a small trace written under the README's file name.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llmbench.cli import main
from llmbench.runner.artifacts.read import load_summary
from llmbench.sim import spawn_sim

GENAI_PERF_README = [
    """genai-perf profile \\
  -m gpt2 \\
  --backend tensorrtllm \\
  --streaming""",
    """genai-perf profile \\
  -m gpt2 \\
  --backend tensorrtllm \\
  --streaming \\
  --concurrency 1 \\
  --generate-plots""",
]

GENAI_PERF_TUTORIAL = [
    """genai-perf profile \\
  -m gpt2 \\
  --backend tensorrtllm \\
  --synthetic-input-tokens-mean 200 \\
  --synthetic-input-tokens-stddev 0 \\
  --output-tokens-mean 100 \\
  --output-tokens-stddev 0 \\
  --output-tokens-mean-deterministic \\
  --streaming \\
  --request-count 50 \\
  --warmup-request-count 10""",
    """genai-perf profile \\
  -m gpt2 \\
  --backend vllm \\
  --synthetic-input-tokens-mean 200 \\
  --synthetic-input-tokens-stddev 0 \\
  --output-tokens-mean 100 \\
  --output-tokens-stddev 0 \\
  --output-tokens-mean-deterministic \\
  --streaming \\
  --request-count 50 \\
  --warmup-request-count 10""",
    """genai-perf profile \\
  -m HuggingFaceH4/zephyr-7b-beta \\
  --endpoint-type chat \\
  --synthetic-input-tokens-mean 200 \\
  --synthetic-input-tokens-stddev 0 \\
  --output-tokens-mean 100 \\
  --output-tokens-stddev 0 \\
  --streaming \\
  --request-count 50 \\
  --warmup-request-count 10""",
    """genai-perf profile \\
  -m gpt2 \\
  --endpoint-type completions \\
  --synthetic-input-tokens-mean 200 \\
  --synthetic-input-tokens-stddev 0 \\
  --output-tokens-mean 100 \\
  --output-tokens-stddev 0 \\
  --request-count 50 \\
  --warmup-request-count 10""",
    # docs/goodput.md
    """genai-perf profile \\
    -m HuggingFaceH4/zephyr-7b-beta \\
    --endpoint-type chat \\
    --streaming \\
    --request-count 10 \\
    --goodput time_to_first_token:75 inter_token_latency:19.75""",
]

SEED_ARTICLE = [
    """genai-perf profile \\
 -m meta-llama/Llama-3.1-70B-Instruct \\
 --endpoint-type chat \\
 --streaming \\
 --concurrency 16 \\
 --synthetic-input-tokens-mean 1024 \\
 --synthetic-input-tokens-stddev 128 \\
 --output-tokens-mean 256 \\
 --output-tokens-stddev 0 \\
 --output-tokens-mean-deterministic \\
 --request-count 200 \\
 --warmup-request-count 20 \\
 --tokenizer meta-llama/Llama-3.1-70B-Instruct""",
    """genai-perf profile \\
 -m meta-llama/Llama-3.1-70B-Instruct \\
 --endpoint-type completions \\
 --concurrency 32 \\
 --synthetic-input-tokens-mean 512 \\
 --synthetic-input-tokens-stddev 64 \\
 --output-tokens-mean 128 \\
 --request-count 200 \\
 --warmup-request-count 20""",
    """genai-perf profile \\
 -m meta/llama-3.1-70b-instruct \\
 --backend tensorrtllm \\
 --streaming \\
 --concurrency 8 \\
 --synthetic-input-tokens-mean 2048 \\
 --synthetic-input-tokens-stddev 0 \\
 --output-tokens-mean 512 \\
 --output-tokens-mean-deterministic \\
 --request-count 100 \\
 --warmup-request-count 10 \\
 --generate-plots""",
    """genai-perf profile \\
 -m meta-llama/Llama-3.1-70B-Instruct \\
 --endpoint-type chat \\
 --streaming \\
 --request-rate 5.0 \\
 --synthetic-input-tokens-mean 1024 \\
 --output-tokens-mean 256 \\
 --request-count 300 \\
 --warmup-request-count 30""",
    """genai-perf analyze \\
 -m meta-llama/Llama-3.1-70B-Instruct \\
 --endpoint-type chat \\
 --streaming \\
 --sweep-type concurrency \\
 --sweep-range 1:256 \\
 --synthetic-input-tokens-mean 1024 \\
 --output-tokens-mean 256 \\
 --request-count 200 \\
 --warmup-request-count 20""",
    """genai-perf analyze \\
 -m meta-llama/Llama-3.1-70B-Instruct \\
 --endpoint-type chat \\
 --streaming \\
 --sweep-type request_rate \\
 --sweep-list 2,4,6,8,10,12 \\
 --synthetic-input-tokens-mean 1024 \\
 --output-tokens-mean 256 \\
 --request-count 200 \\
 --warmup-request-count 20""",
    """genai-perf analyze \\
 -m meta-llama/Llama-3.1-70B-Instruct \\
 --endpoint-type chat \\
 --streaming \\
 --sweep-type input_sequence_length \\
 --sweep-list 256,512,1024,2048,4096 \\
 --concurrency 16 \\
 --output-tokens-mean 256 \\
 --request-count 200 \\
 --warmup-request-count 20""",
]

#: README: trace replay from a Mooncake-style payload file (a fixed schedule).
README_PAYLOAD = """genai-perf profile \\
    --tokenizer deepseek-ai/DeepSeek-R1-Distill-Llama-8B \\
    -m deepseek-ai/DeepSeek-R1-Distill-Llama-8B \\
    --endpoint-type chat \\
    --url http://localhost:8000 \\
    --streaming \\
    --input-file payload:sin_b512_t600_rr5.0-20.0-150.0_io3000150-3000150-0.2-0.8-10.jsonl"""

#: The only edits: fewer requests, smaller concurrency, two sweep points.
SMALL_REQUESTS = 4
SMALL_WARMUP = 1
SMALL_CONCURRENCY = 2

SimFactory = Callable[[str], str]


@pytest.fixture(scope="module")
def sim_for() -> Iterator[SimFactory]:
    """One sim per served model name, started on first use and shared by the module."""
    running: dict[str, tuple[str, subprocess.Popen[str]]] = {}

    def get(model: str) -> str:
        if model not in running:
            running[model] = spawn_sim(["--model", model, "--ttft-ms", "1", "--itl-ms", "0"])
        return running[model][0]

    yield get
    for _, proc in running.values():
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local Hugging Face cache holding the seed's tokenizer id (our embedded tokenizer's
    file under that name): ``--tokenizer <hub id>`` resolves locally, never downloading."""
    from llmbench import tokenizer

    source = Path(tokenizer.__file__).parent / "data" / "tokenizer.json"
    cache = tmp_path / "hf-hub"
    repo = cache / "models--meta-llama--Llama-3.1-70B-Instruct"
    (repo / "snapshots" / "0123abc").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    shutil.copy(source, repo / "snapshots" / "0123abc" / "tokenizer.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def words(command: str) -> list[str]:
    """The argv of a shell command line as the README shows it (``\\`` line breaks)."""
    argv = shlex.split(command.replace("\\\n", " "))  # a shell joins continued lines
    assert argv[0] == "genai-perf"
    return argv[1:]


def scaled(argv: list[str], url: str, out: Path) -> list[str]:
    """``argv`` with the sim's URL, an artefact folder and small request counts."""
    small = {
        "--request-count": str(SMALL_REQUESTS),
        "--warmup-request-count": str(SMALL_WARMUP),
    }
    result: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if word in small:
            result += [word, small[word]]
        elif word == "--concurrency":
            result += [word, str(min(int(value), SMALL_CONCURRENCY))]
        elif word == "--sweep-range":
            result += [word, "1:2"]
        elif word == "--sweep-list":
            result += [word, ",".join(value.split(",")[:2])]
        elif word in ("--url", "-u"):
            pass  # replaced below
        else:
            result.append(word)
            i += 1
            continue
        i += 2
    if "--request-count" not in result:
        result += ["--request-count", str(SMALL_REQUESTS)]
    return [*result, "--url", url, "--artifact-dir", str(out)]


def model_of(argv: list[str]) -> str:
    return argv[argv.index("-m") + 1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(command, id=f"{source}-{i}")
        for source, commands in (
            ("readme", GENAI_PERF_README),
            ("tutorial", GENAI_PERF_TUTORIAL),
            ("seed", SEED_ARTICLE),
        )
        for i, command in enumerate(commands, start=1)
    ],
)
def test_genai_perf_command_line_runs_unchanged(
    command: str, sim_for: SimFactory, hf_cache: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = words(command)
    out = tmp_path / "art"
    code = main(scaled(argv, sim_for(model_of(argv)), out))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "usage:" not in err and "unrecognized" not in err
    if argv[0] == "profile":
        (point,) = [p for p in out.iterdir() if p.is_dir()]  # GenAI-Perf's per-point folder
        summary = load_summary(point)
        assert summary.request_count.avg == SMALL_REQUESTS
        assert summary.errors.total == 0
        if "--generate-plots" in argv:
            assert (point / "report.html").is_file()
            assert (point / "timeseries.png").is_file()  # drawn when plots are asked for
        else:
            assert not (point / "timeseries.png").exists()  # its CPU is not spent unasked
        if "--goodput" in argv:  # GenAI-Perf's names became our limits
            assert summary.goodput is not None
            assert summary.goodput.slo == {"ttft": 75.0, "itl": 19.75}
    else:
        assert (out / "analyze_export_genai_perf.csv").is_file()
        assert len([p for p in out.iterdir() if p.is_dir() and p.name != "plots"]) == 2


def test_payload_input_file_replays_the_trace(
    sim_for: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's command line with only the URL and the artefact folder changed; the
    trace and the tokenizer it names are made locally (small rows, the same shape)."""
    argv = words(README_PAYLOAD)
    model = model_of(argv)
    trace_name = argv[argv.index("--input-file") + 1].removeprefix("payload:")
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]},
        {"timestamp": 20, "input_length": 40, "output_length": 2, "hash_ids": [0]},
        {"timestamp": 45, "input_length": 12, "output_length": 2},
    ]
    monkeypatch.chdir(tmp_path)
    (tmp_path / trace_name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    from llmbench import tokenizer

    cache = tmp_path / "hf-hub"
    repo = cache / ("models--" + model.replace("/", "--"))
    (repo / "snapshots" / "0123abc").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    shutil.copy(Path(tokenizer.__file__).parent / "data" / "tokenizer.json",
                repo / "snapshots" / "0123abc" / "tokenizer.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    url = sim_for(model)
    i = argv.index("--url")
    out = tmp_path / "art"
    code = main([*argv[:i], "--url", url, *argv[i + 2:], "--artifact-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    (point,) = [p for p in out.iterdir() if p.is_dir()]
    assert point.name.endswith("-openai-chat-fixed_schedule")
    summary = load_summary(point)
    assert summary.request_count.avg == len(rows)
    assert summary.input_sequence_length is not None
    assert summary.input_sequence_length.max == 600
    assert summary.dispatch is not None  # sent open loop, the lag recorded


def test_profile_export_file_names_every_export_file(
    sim_for: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "art"
    code = main([
        "profile", "-m", "gpt2", "--url", sim_for("gpt2"), "--artifact-dir", str(out),
        "--request-count", "3", "--osl", "4", "--profile-export-file", "run1.json",
    ])
    assert code == 0, capsys.readouterr().err
    (point,) = [p for p in out.iterdir() if p.is_dir()]
    names = {p.name for p in point.iterdir()}
    assert {"run1.json", "run1_genai_perf.json", "run1_genai_perf.csv"} <= names
    assert not any(n.startswith("profile_export") for n in names)
    assert load_summary(point).request_count.avg == 3
