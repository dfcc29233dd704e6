"""``--tokenizer-revision``: a hub id's cached snapshot of a branch, tag or commit, never
fetched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llmbench import tokenizer
from llmbench.tokenizer import TokenizerError, load_tokenizer

GOOD = Path(tokenizer.__file__).parent / "data" / "tokenizer.json"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cached ``acme/tiny``: ``main`` is broken, tag ``v2`` and commit ``ccc`` are good."""
    for var in ("HF_HOME", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = tmp_path / "hub" / "models--acme--tiny"
    for commit in ("aaa", "bbb", "ccc"):
        (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / "aaa" / "tokenizer.json").write_text("{broken")
    shutil.copy(GOOD, repo / "snapshots" / "bbb" / "tokenizer.json")
    shutil.copy(GOOD, repo / "snapshots" / "ccc" / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("aaa\n")
    (repo / "refs" / "v2").write_text("bbb\n")
    return repo


@pytest.mark.parametrize("revision", ["v2", "ccc"])
def test_revision_picks_its_snapshot(repo: Path, revision: str) -> None:
    tok = load_tokenizer("acme/tiny", revision=revision)
    assert tok.count("hello world") >= 1


def test_without_revision_main_is_used(repo: Path) -> None:
    with pytest.raises(TokenizerError, match="not a Hugging Face fast-tokenizer file"):
        load_tokenizer("acme/tiny")


def test_revision_not_cached_fails_naming_it(repo: Path) -> None:
    with pytest.raises(TokenizerError) as info:
        load_tokenizer("acme/tiny", revision="v9")
    assert "revision v9 (--tokenizer-revision)" in str(info.value)


def test_revision_is_ignored_for_paths_and_the_default() -> None:
    assert load_tokenizer(str(GOOD), revision="v9").count("hello") >= 1
    assert load_tokenizer(None, revision="v9").count("hello") >= 1
