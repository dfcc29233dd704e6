"""The images the real nodes run, built by ``hack/image/build.sh`` and imported into each
node's containerd (``ctr -n k8s.io images import``): no registry, no pull.

An imported image carries the label ``llmbench.io/key=<archive name>``; a node whose store
already has the same archive's image imports nothing (the stores persist per cluster number
and node, see node.py), so only the first start after an image changed pays for the import.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "image" / "build.sh"
KEY_LABEL = "llmbench.io/key"


class ImageError(RuntimeError):
    """One-line, actionable reason why the images could not be built or loaded."""


@dataclass(frozen=True)
class Image:
    """One image: its short name in build.sh, the reference pods use, its archive."""

    name: str
    ref: str
    archive: Path

    @property
    def key(self) -> str:
        return self.archive.stem


def built_images(build: bool = True, timeout: float = 1800) -> dict[str, Image]:
    """The images of this tree by short name (``llmbench``, ``sim``, ``dcgm``, ``pause``);
    built first when ``build`` (a warm tree costs about a second)."""
    argv = ["bash", str(BUILD_SCRIPT), *([] if build else ["--list"])]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ImageError(
            f"step images: hack/image/build.sh took over {timeout:.0f}s — see "
            "~/.cache/llmbench/images/build.log"
        ) from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ImageError(f"step images: {last}")
    images = {}
    for line in r.stdout.splitlines():
        name, ref, archive = line.split()
        images[name] = Image(name, ref, Path(archive))
    return images


def refs() -> dict[str, str]:
    """The references pods use, by short name (``hack/image/build.sh --refs``: one table)."""
    r = subprocess.run(["bash", str(BUILD_SCRIPT), "--refs"], capture_output=True, text=True,
                       timeout=60, check=True)
    return dict(line.split() for line in r.stdout.splitlines())


def ctr(sock: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", str(sock), "--namespace", "k8s.io", *args],
        capture_output=True, text=True, timeout=timeout,
    )


def present_keys(sock: Path) -> dict[str, str]:
    """Image reference -> its ``llmbench.io/key`` label, in the node's store."""
    r = ctr(sock, "images", "ls")
    if r.returncode != 0:
        raise ImageError(f"step images: ctr images ls failed: {r.stderr.strip()}")
    out = {}
    for line in r.stdout.splitlines()[1:]:
        words = line.split()
        if not words:
            continue
        labels = dict(
            kv.split("=", 1) for kv in words[-1].split(",") if "=" in kv
        )
        out[words[0]] = labels.get(KEY_LABEL, "")
    return out


def load(sock: Path, images: list[Image]) -> list[str]:
    """Imports into the containerd at ``sock`` the images it lacks; returns their names."""
    have = present_keys(sock)
    loaded = []
    for image in images:
        if have.get(image.ref) == image.key:
            continue
        # The older build of this image (and content-keyed tags of it) go first, synchronously
        # garbage-collected: containerd keeps unreferenced blobs and snapshots until its next
        # GC, and a node store then grows by an image's size at every source change.
        repo = image.ref.rpartition(":")[0]
        stale = [ref for ref in have if ref.rpartition(":")[0] == repo]
        if stale:
            ctr(sock, "images", "rm", "--sync", *stale)
        r = ctr(sock, "images", "import", str(image.archive))
        if r.returncode != 0:
            raise ImageError(
                f"step images: importing {image.archive} failed: {r.stderr.strip()[-300:]} — "
                "remove the archive and run 'bash hack/image/build.sh'"
            )
        r = ctr(sock, "images", "label", image.ref, f"{KEY_LABEL}={image.key}")
        if r.returncode != 0:
            raise ImageError(f"step images: labelling {image.ref} failed: {r.stderr.strip()}")
        loaded.append(image.name)
    return loaded
