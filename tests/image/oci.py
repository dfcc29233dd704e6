"""Running a built image with runc alone: no container daemon, no registry.

``hack/image/build.sh`` leaves each image as a docker-archive tarball. :func:`unpack` turns
one into a root filesystem (its layers in order, whiteouts applied, owners kept), once per
archive under ``~/.cache/llmbench/images/rootfs-<archive>/``; :func:`run` starts a command in
it the way the operator's pods run it: the image's own entrypoint, environment, working
directory and user (65532 for llmbench), a **read-only root**, no capabilities, no new
privileges, writable directories only where the caller binds one (the pods' emptyDirs), and
the host's network (so a test reaches a server in another container on 127.0.0.1).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

RUNC_ROOT = Path("/run/llmbench-runc")


@dataclass(frozen=True)
class ImageConfig:
    """What the image says about how to run it (its config's ``config`` object)."""

    entrypoint: list[str]
    cmd: list[str]
    env: list[str]
    user: str
    workdir: str
    labels: dict[str, str]


@dataclass(frozen=True)
class Unpacked:
    rootfs: Path
    config: ImageConfig


def _read_config(archive: Path) -> tuple[ImageConfig, list[str]]:
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]  # type: ignore[arg-type]
        raw = json.load(tar.extractfile(manifest["Config"]))["config"]  # type: ignore[arg-type]
    config = ImageConfig(
        entrypoint=raw.get("Entrypoint") or [], cmd=raw.get("Cmd") or [],
        env=raw.get("Env") or [], user=raw.get("User") or "0:0",
        workdir=raw.get("WorkingDir") or "/", labels=raw.get("Labels") or {},
    )
    return config, list(manifest["Layers"])


def _apply_layer(layer: tarfile.TarFile, root: Path) -> None:
    """One layer onto ``root``: ``.wh.NAME`` deletes NAME, ``.wh..wh..opq`` empties its dir."""
    members = []
    for m in layer.getmembers():
        path = Path(m.name)
        if path.name == ".wh..wh..opq":
            d = root / path.parent
            if d.is_dir():
                for child in d.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        elif path.name.startswith(".wh."):
            gone = root / path.parent / path.name[len(".wh."):]
            if gone.is_dir() and not gone.is_symlink():
                shutil.rmtree(gone)
            elif gone.exists() or gone.is_symlink():
                gone.unlink()
        else:
            members.append(m)
    # our own archive: extracted as is (owners, modes, device nodes), like a runtime would
    if hasattr(tarfile, "fully_trusted_filter"):
        layer.extractall(root, members=members, numeric_owner=True, filter="fully_trusted")
    else:  # pragma: no cover - Python without extraction filters
        layer.extractall(root, members=members, numeric_owner=True)


def unpack(archive: Path) -> Unpacked:
    """The archive's root filesystem (cached per archive; rebuilt archives have new names)."""
    config, layers = _read_config(archive)
    dest = archive.parent / f"rootfs-{archive.stem}"
    done = dest / ".llmbench-unpacked"
    with open(archive.parent / ".rootfs.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if dest.exists():
                shutil.rmtree(dest)
            tmp = dest.with_name(dest.name + ".tmp")
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
            with tarfile.open(archive) as outer:
                for name in layers:
                    inner = outer.extractfile(name)
                    assert inner is not None, name
                    with tarfile.open(fileobj=inner) as layer:
                        _apply_layer(layer, tmp)
            (tmp / ".llmbench-unpacked").write_text(archive.name)
            tmp.rename(dest)
            for old in archive.parent.glob("rootfs-*"):  # rootfs of pruned archives
                if old != dest and not (archive.parent / (old.name[len("rootfs-"):] + ".tar")
                                        ).exists():
                    shutil.rmtree(old, ignore_errors=True)
    return Unpacked(dest, config)


def _runtime_spec(image: Unpacked, args: Sequence[str], binds: Mapping[str, Path],
                  env: Mapping[str, str], entrypoint: Sequence[str] | None) -> dict[str, object]:
    uid, _, gid = image.config.user.partition(":")
    argv = [*(image.config.entrypoint if entrypoint is None else entrypoint), *args]
    mounts: list[dict[str, object]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/etc/resolv.conf", "type": "bind", "source": "/etc/resolv.conf",
         "options": ["rbind", "ro"]},
    ]
    mounts += [{"destination": dest, "type": "bind", "source": str(src),
                "options": ["rbind", "rw"]} for dest, src in binds.items()]
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": int(uid), "gid": int(gid or uid)},
            "args": argv,
            "env": [*image.config.env, *(f"{k}={v}" for k, v in env.items())],
            "cwd": image.config.workdir,
            "capabilities": {k: [] for k in ("bounding", "effective", "inheritable",
                                              "permitted", "ambient")},
            "noNewPrivileges": True,
        },
        "root": {"path": str(image.rootfs), "readonly": True},
        "hostname": "llmbench-image-test",
        "mounts": mounts,
        "linux": {
            # the host's network namespace: servers in other containers on 127.0.0.1
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
        },
    }


@contextlib.contextmanager
def bundle(image: Unpacked, args: Sequence[str], binds: Mapping[str, Path] | None = None,
           env: Mapping[str, str] | None = None,
           entrypoint: Sequence[str] | None = None) -> Iterator[tuple[Path, str]]:
    """A runc bundle (config.json only: the root is the shared unpacked one) and an id."""
    RUNC_ROOT.mkdir(parents=True, exist_ok=True)
    cid = f"llmbench-image-{uuid.uuid4().hex[:10]}"
    where = RUNC_ROOT / "bundles" / cid
    where.mkdir(parents=True)
    (where / "config.json").write_text(json.dumps(
        _runtime_spec(image, args, binds or {}, env or {}, entrypoint)))
    try:
        yield where, cid
    finally:
        subprocess.run(["runc", "--root", str(RUNC_ROOT / "state"), "delete", "--force", cid],
                       capture_output=True, check=False)
        shutil.rmtree(where, ignore_errors=True)


def runc_argv(where: Path, cid: str) -> list[str]:
    return ["runc", "--root", str(RUNC_ROOT / "state"), "run", "--bundle", str(where), cid]


def run(image: Unpacked, *args: str, binds: Mapping[str, Path] | None = None,
        env: Mapping[str, str] | None = None, entrypoint: Sequence[str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``args`` after the image's entrypoint (or ``entrypoint``), in a container; waits."""
    with bundle(image, args, binds, env, entrypoint) as (where, cid):
        return subprocess.run(runc_argv(where, cid), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


def writable_dir(path: Path, uid: int = 65532) -> Path:
    """A host directory the container's user can write (what an emptyDir is to the pod)."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, uid, uid)
    return path
