"""Tokenizer loading and behaviour: embedded default, local files, HF cache, /tokenize."""

from __future__ import annotations

import hashlib
import json
import platform
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from stubs import JSONHandler
from tokenizers import decoders, models, pre_tokenizers, trainers

from llmbench.tokenizer import (
    DEFAULT_TOKENIZER_NAME,
    HFTokenizer,
    ServerTokenizer,
    Tokenizer,
    TokenizerError,
    default_tokenizer,
    load_tokenizer,
)

CORPUS = [
    "the quick brown fox jumps over the lazy dog while the cat sleeps",
    "a benchmark measures latency and throughput of an inference server",
    "tokens are counted by the tokenizer before the request is sent",
] * 20


def wordpiece() -> tokenizers.Tokenizer:
    """A small WordPiece tokenizer (BERT-style: no leading-space tokens, ## continuations)."""
    tok = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(
        CORPUS, trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]"],
                                          show_progress=False)
    )
    return tok


# -- embedded default ------------------------------------------------------------------------


def test_default_is_embedded_cached_and_llm_like() -> None:
    tok = default_tokenizer()
    assert tok is default_tokenizer()
    assert isinstance(tok, Tokenizer)
    assert tok.name == DEFAULT_TOKENIZER_NAME
    assert 4000 <= tok.backend.get_vocab_size() <= 8192
    text = "Explicit is better than implicit. Kubernetes runs the benchmark."
    ids = tok.encode(text)
    # Sub-word BPE: fewer tokens than characters, more than words.
    assert len(text.split()) < len(ids) < len(text) / 2
    assert tok.count(text) == len(ids)
    assert tok.decode(ids) == text


@pytest.mark.parametrize("alias", [None, "", "default", "llmbench-default", " default "])
def test_default_aliases(alias: str | None) -> None:
    assert load_tokenizer(alias) is default_tokenizer()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_default_round_trips_any_text(text: str) -> None:
    tok = default_tokenizer()
    assert tok.decode(tok.encode(text)) == text
    assert tok.count(text) == len(tok.encode(text))


def test_default_single_token_words() -> None:
    tok = default_tokenizer()
    words = tok.single_token_words()
    assert len(words) > 1000
    assert len(set(words)) == len(words)
    assert "the" in words
    for w in words:
        ids = tok.encode(" " + w)
        assert len(ids) == 1, w
        assert tok.decode(ids) == " " + w
    rng = random.Random(0)
    for n in (1, 7, 100, 3000):
        sample = rng.choices(words, k=n)
        text = "".join(" " + w for w in sample)
        assert tok.count(text) == n
        # Each word stays its own token: the token stream is the words in order.
        assert [tok.decode([i]) for i in tok.encode(text)] == [" " + w for w in sample]


def test_single_token_words_returns_a_copy() -> None:
    tok = default_tokenizer()
    tok.single_token_words().clear()
    assert tok.single_token_words()


# -- local files -----------------------------------------------------------------------------


def test_load_directory_and_file(tmp_path: Path) -> None:
    wordpiece().save(str(tmp_path / "tokenizer.json"))
    by_dir = load_tokenizer(str(tmp_path))
    by_file = load_tokenizer(str(tmp_path / "tokenizer.json"))
    assert isinstance(by_dir, HFTokenizer) and isinstance(by_file, HFTokenizer)
    text = "the lazy cat measures the latency"
    assert by_dir.encode(text) == by_file.encode(text)
    assert by_dir.count(text) >= 6
    assert by_dir.name == str(tmp_path)


def test_wordpiece_single_token_words_are_exact() -> None:
    tok = HFTokenizer(wordpiece(), "wp")
    words = tok.single_token_words()
    assert "the" in words
    sample = random.Random(1).choices(words, k=50)
    assert tok.count(" ".join(sample)) == 50


def test_directory_without_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="--tokenizer .*no tokenizer.json"):
        load_tokenizer(str(tmp_path))


def test_corrupt_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError, match="--tokenizer .*not a Hugging Face fast-tokenizer"):
        load_tokenizer(str(bad))


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="--tokenizer .*no such file"):
        load_tokenizer(str(tmp_path / "nope" / "tokenizer.json"))


# -- hub ids: local cache only ---------------------------------------------------------------


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "hf"


def test_hub_id_without_cache_fails_clearly(hf_home: Path) -> None:
    with pytest.raises(TokenizerError) as info:
        load_tokenizer("meta-llama/Llama-3.1-8B-Instruct")
    msg = str(info.value)
    assert "--tokenizer meta-llama/Llama-3.1-8B-Instruct" in msg
    assert "no model hub is reachable" in msg
    assert "--tokenizer /path/to/dir" in msg
    assert str(hf_home / "hub") in msg


def test_hub_id_from_cache(hf_home: Path) -> None:
    repo = hf_home / "hub" / "models--acme--tiny"
    old = repo / "snapshots" / "aaa"
    main = repo / "snapshots" / "bbb"
    old.mkdir(parents=True)
    main.mkdir(parents=True)
    (old / "tokenizer.json").write_text("{broken")
    wordpiece().save(str(main / "tokenizer.json"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("bbb\n")
    tok = load_tokenizer("acme/tiny")
    assert tok.name == "acme/tiny"
    assert tok.count("the cat") == 2


# -- server: the target's /tokenize ----------------------------------------------------------


class _Handler(JSONHandler):
    seen_auth: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.read_json()
        _Handler.seen_auth.append(self.headers.get("Authorization"))
        tok = default_tokenizer()
        if self.path == "/tokenize" and body.get("model") == "m":
            ids = tok.encode(body["prompt"])
            self.reply_json({"count": len(ids), "max_model_len": 4096, "tokens": ids})
        elif self.path == "/detokenize" and body.get("model") == "m":
            self.reply_json({"prompt": tok.decode(body["tokens"])})
        elif self.path in ("/tokenize", "/detokenize"):
            self.send_error(400, "unknown model")
        else:
            self.send_error(404)


@pytest.fixture
def tokenize_server(serve_http: Callable[..., str]) -> Iterator[str]:
    yield serve_http(_Handler)


def test_server_tokenizer_matches_server(tokenize_server: str) -> None:
    tok = load_tokenizer(
        "server", url=tokenize_server + "/v1/", model="m",
        headers={"Authorization": "Bearer k"},
    )
    assert isinstance(tok, ServerTokenizer)
    try:
        assert tok.name == f"server:{tokenize_server}/tokenize"
        text = "Tokens are counted by the server."
        assert tok.encode(text) == default_tokenizer().encode(text)
        assert tok.count(text) == default_tokenizer().count(text)
        assert tok.decode(tok.encode(text)) == text
        assert tok.single_token_words() == []
        assert _Handler.seen_auth[-1] == "Bearer k"
    finally:
        tok.close()


def test_server_tokenizer_errors(tokenize_server: str) -> None:
    with pytest.raises(TokenizerError, match="--tokenizer server needs"):
        load_tokenizer("server", url=tokenize_server)
    wrong_model = ServerTokenizer(tokenize_server, "other")
    try:
        with pytest.raises(TokenizerError, match="HTTP 400.*-m/--model"):
            wrong_model.count("x")
    finally:
        wrong_model.close()
    no_endpoint = ServerTokenizer(tokenize_server + "/api", "m")
    try:
        with pytest.raises(TokenizerError, match="404.*--tokenizer DIR"):
            no_endpoint.count("x")
    finally:
        no_endpoint.close()


def test_server_tokenizer_unreachable() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = server.server_address[1]
    server.server_close()  # the port is now closed: connection refused
    tok = ServerTokenizer(f"http://127.0.0.1:{port}", "m", timeout=2.0)
    try:
        with pytest.raises(TokenizerError, match=f"cannot reach http://127.0.0.1:{port}/tokenize"):
            tok.count("x")
    finally:
        tok.close()


# -- the shipped file is what hack/build_tokenizer.py makes ----------------------------------

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "llmbench" / "tokenizer" / "data"
BUILD = json.loads((DATA / "tokenizer.build.json").read_text())


def test_shipped_file_matches_its_build_record() -> None:
    text = (DATA / "tokenizer.json").read_bytes()
    assert hashlib.sha256(text).hexdigest() == BUILD["sha256"]
    assert default_tokenizer().backend.get_vocab_size() == BUILD["vocab_size"]
    assert len(text) < 512 * 1024


def test_build_is_reproducible() -> None:
    """Byte-identical under the recorded Python and tokenizers versions (the corpus is the
    interpreter's own docs, the trainer the library's); elsewhere the rebuild must still
    work and give the same vocabulary size, only the bytes may differ."""
    script = ROOT / "hack" / "build_tokenizer.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120
    )
    recorded = (platform.python_version(), tokenizers.__version__) == (
        BUILD["python"],
        BUILD["tokenizers"],
    )
    if recorded:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode in (0, 1), done.stderr
        assert f'"vocab_size": {BUILD["vocab_size"]}' in done.stderr
