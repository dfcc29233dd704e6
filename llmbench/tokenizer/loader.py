"""Tokenizers: count input/output tokens client-side, with no network unless asked to.

Why this module exists: ISL/OSL need a tokenizer (DESIGN.md: prefer the server's ``usage``,
fall back to the tokenizer) and synthetic prompts must have an *exact* token count. Every
peer tool downloads a tokenizer from the Hugging Face hub, which breaks on air-gapped clusters
-- the most common complaint about them. Here:

* :func:`default_tokenizer` is an embedded byte-level BPE (the GPT-2/Llama-3 algorithm, 8192
  tokens, trained by ``hack/build_tokenizer.py`` on text that ships with CPython) -- always
  available, deterministic, and "LLM-like" in how it splits text;
* ``--tokenizer DIR`` / ``--tokenizer path/tokenizer.json`` loads a model's own fast tokenizer
  with the ``tokenizers`` library;
* ``--tokenizer org/name`` loads from the local Hugging Face cache only -- never the network;
* ``--tokenizer server`` asks the target's vLLM-style ``/tokenize`` endpoint, so counts match
  the server exactly without shipping any file.

Counts never include special tokens (BOS etc.): a prompt's token count is the count of the
text we control, as GenAI-Perf counts it (``add_special_tokens=False``). The server's
``usage.prompt_tokens`` will be larger by the chat template; the metrics layer records that
as a client/server mismatch, it is not an error here.

Example::

    tok = load_tokenizer(None)                 # embedded default
    tok.count("Hello world")                   # -> 2
    words = tok.single_token_words()           # [" the"-style words, without the space]
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Protocol, runtime_checkable

import httpx
import tokenizers

__all__ = [
    "DEFAULT_TOKENIZER_NAME",
    "HFTokenizer",
    "ServerTokenizer",
    "Tokenizer",
    "TokenizerError",
    "default_tokenizer",
    "load_tokenizer",
]

DEFAULT_TOKENIZER_NAME = "llmbench-default"
_DEFAULT_ALIASES = frozenset({"", "default", DEFAULT_TOKENIZER_NAME})
_WORD_RE = re.compile(r"[a-z]+")
# A hub id: "name" or "org/name" made of the characters the hub allows.
_HUB_ID_RE = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


class TokenizerError(ValueError):
    """A tokenizer could not be loaded or used; the message names ``--tokenizer`` and a fix.

    A ``ValueError`` so that the CLI reports it as a usage error rather than a crash.
    """


@runtime_checkable
class Tokenizer(Protocol):
    """What the runner needs from a tokenizer.

    ``single_token_words`` may return an empty list when the tokenizer cannot enumerate its
    vocabulary (the server tokenizer); callers then fall back to search-and-fix prompt
    building.
    """

    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without special tokens."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (``len(encode(text))``, possibly cheaper)."""
        ...

    def single_token_words(self) -> list[str]:
        """Words ``w`` such that ``" " + w`` is exactly one token, also when concatenated."""
        ...


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` (Hugging Face fast tokenizer file) behind :class:`Tokenizer`.

    Also offers batch calls, which run in Rust threads and make building thousands of
    prompts cheap.
    """

    def __init__(self, tok: tokenizers.Tokenizer, name: str) -> None:
        self._tok = tok
        self.name = name
        self._words: tuple[str, ...] | None = None
        self._additive: bool | None = None

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The wrapped ``tokenizers.Tokenizer``."""
        return self._tok

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without special tokens."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` (special tokens skipped)."""
        return str(self._tok.decode(list(ids)))

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts at once (parallel in Rust)."""
        encs = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encs]

    def single_token_words(self) -> list[str]:
        """Lower-case ASCII words that are one token with a leading space, in vocabulary order.

        A word qualifies when some token decodes to ``" " + word`` (or to ``word`` for
        tokenizers such as WordPiece whose decoder drops the space), ``" " + word`` encodes to
        exactly that one token, and the concatenation of all qualifying words encodes to one
        token per word (so any sequence of them has a token count equal to its length; words
        that merge with a neighbour are dropped). The result is cached.
        """
        if self._words is None:
            self._words = tuple(self._find_single_token_words())
        return list(self._words)

    def words_add_up(self) -> bool:
        """Whether token counts of space-joined single-token words simply add up.

        True when the pre-tokeniser cuts ``" w1 w2 ..."`` into one piece per word (byte-level
        regex, Metaspace, BERT/whitespace splitting) and the normaliser leaves such text
        alone: BPE/WordPiece never merge across pieces, so N words are N tokens whatever
        their order, and prompt building can skip re-encoding every prompt (~1 us/token).
        """
        if self._additive is None:
            words = self.single_token_words()[:256]
            sample = "".join(" " + w for w in words)
            norm, pre = self._tok.normalizer, self._tok.pre_tokenizer
            self._additive = bool(
                words
                and pre is not None
                and (norm is None or norm.normalize_str(sample) == sample)
                and len(pre.pre_tokenize_str(sample)) == len(words)
            )
        return self._additive

    def _find_single_token_words(self) -> list[str]:
        size = self._tok.get_vocab_size(with_added_tokens=False)
        ids = list(range(size))
        texts = self._tok.decode_batch([[i] for i in ids])
        cands: list[tuple[int, str]] = []
        seen: set[str] = set()
        for i, text in zip(ids, texts, strict=True):
            word = text[1:] if text.startswith(" ") else text
            if word not in seen and _WORD_RE.fullmatch(word):
                cands.append((i, word))
                seen.add(word)
        encs = self._tok.encode_batch([" " + w for _, w in cands], add_special_tokens=False)
        words = [w for (i, w), e in zip(cands, encs, strict=True) if e.ids == [i]]
        return self._drop_merging(words)

    def _drop_merging(self, words: list[str]) -> list[str]:
        """Keep only words that stay one token each when concatenated."""
        if not words or self.count("".join(" " + w for w in words)) == len(words):
            return words
        # Some words merge with their neighbours (no whitespace pre-tokeniser): test each
        # between two copies of a neighbour and keep those adding exactly one token.
        kept = []
        for w in words:
            if self.count(f" {w} {w} {w}") == 3:
                kept.append(w)
        if kept and self.count("".join(" " + w for w in kept)) == len(kept):
            return kept
        return []


class ServerTokenizer:
    """Tokenizes through the target's vLLM-style ``/tokenize`` and ``/detokenize`` endpoints.

    Used for ``--tokenizer server``: counts then match the server exactly without shipping
    the model's tokenizer. It makes one HTTP round trip per call, so it is meant for
    prompt-building time and for the post-run fallback count, never the hot path.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        client: httpx.Client | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        # vLLM and SGLang serve /tokenize at the root, next to /v1: accept either form.
        if base.endswith("/v1"):
            base = base[: -len("/v1")]
        self.base_url = base
        self.model = model
        self.name = f"server:{base}/tokenize"
        self._client = client or httpx.Client(headers=dict(headers or {}), timeout=timeout)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def _post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        url = f"{self.base_url}{path}"
        try:
            resp = self._client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise TokenizerError(
                f"--tokenizer server: cannot reach {url} ({exc.__class__.__name__}: {exc}); "
                "check --url, or pass a local tokenizer directory with --tokenizer DIR"
            ) from exc
        if resp.status_code == 404:
            raise TokenizerError(
                f"--tokenizer server: {url} returned 404 -- the target has no {path} endpoint "
                "(vLLM, SGLang and `llmbench sim` have one); pass --tokenizer DIR with the "
                "model's tokenizer.json instead"
            )
        if resp.status_code >= 400:
            raise TokenizerError(
                f"--tokenizer server: {url} returned HTTP {resp.status_code}: "
                f"{resp.text[:200]!r}; check -m/--model and the API key"
            )
        try:
            data = resp.json()
        except ValueError as exc:
            raise TokenizerError(f"--tokenizer server: {url} returned non-JSON body") from exc
        if not isinstance(data, dict):
            raise TokenizerError(f"--tokenizer server: {url} returned {type(data).__name__}")
        return data

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as the server tokenizes it, without special tokens."""
        data = self._post(
            "/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False}
        )
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise TokenizerError(
                f"--tokenizer server: {self.base_url}/tokenize response has no 'tokens' list"
            )
        return [int(t) for t in tokens]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` via ``/detokenize``."""
        data = self._post("/detokenize", {"model": self.model, "tokens": list(ids)})
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise TokenizerError(
                f"--tokenizer server: {self.base_url}/detokenize response has no 'prompt'"
            )
        return prompt

    def count(self, text: str) -> int:
        """Token count of ``text`` (the response's ``count``, else ``len(tokens)``)."""
        data = self._post(
            "/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False}
        )
        count = data.get("count")
        if isinstance(count, int):
            return count
        tokens = data.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
        raise TokenizerError(
            f"--tokenizer server: {self.base_url}/tokenize response has neither 'count' "
            "nor 'tokens'"
        )

    def single_token_words(self) -> list[str]:
        """Unknown for a remote tokenizer: the vocabulary cannot be listed over HTTP."""
        return []


@functools.cache
def default_tokenizer() -> HFTokenizer:
    """The embedded byte-level BPE shipped in ``llmbench/tokenizer/data/tokenizer.json`` (cached).

    Needs no network and no files outside the package; the simulator uses its single-token
    words as output tokens, so the client's fallback OSL count is exact against it.
    """
    text = resources.files("llmbench.tokenizer").joinpath(
        "data/tokenizer.json"
    ).read_text(encoding="utf-8")
    return HFTokenizer(tokenizers.Tokenizer.from_str(text), DEFAULT_TOKENIZER_NAME)


def hf_cache_dirs() -> list[Path]:
    """Where the Hugging Face hub cache may be, in the hub library's precedence order."""
    dirs: list[Path] = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        dirs.append(Path(os.environ["HUGGINGFACE_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]) / "hub")
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    dirs.append(base / "huggingface" / "hub")
    seen: list[Path] = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return seen


def _from_hf_cache(hub_id: str, revision: str | None = None) -> Path | None:
    """The cached ``tokenizer.json`` of ``hub_id``: the ``refs/main`` snapshot, else newest.

    With ``revision`` (a branch or tag the cache has a ref for, or a commit): that snapshot
    only.
    """
    folder = "models--" + hub_id.replace("/", "--")
    for cache in hf_cache_dirs():
        repo = cache / folder
        if not repo.is_dir():
            continue
        if revision is not None:
            ref = repo / "refs" / revision
            commit = ref.read_text().strip() if ref.is_file() else revision
            candidate = repo / "snapshots" / commit / "tokenizer.json"
            if candidate.is_file():
                return candidate
            continue
        ref = repo / "refs" / "main"
        if ref.is_file():
            candidate = repo / "snapshots" / ref.read_text().strip() / "tokenizer.json"
            if candidate.is_file():
                return candidate
        found = sorted(
            (repo / "snapshots").glob("*/tokenizer.json"),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        if found:
            return found[0]
    return None


def _from_file(path: Path, name: str) -> HFTokenizer:
    try:
        tok = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises plain Exception subclasses
        raise TokenizerError(
            f"--tokenizer {name}: {path} is not a Hugging Face fast-tokenizer file ({exc}); "
            "pass the tokenizer.json the model ships with"
        ) from exc
    return HFTokenizer(tok, name)


def load_tokenizer(
    spec: str | None,
    *,
    url: str | None = None,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
    revision: str | None = None,
) -> Tokenizer:
    """Resolve a ``--tokenizer`` value. Never touches the network except for ``server``.

    Args:
        spec: ``None``/``"default"``/``"llmbench-default"`` (embedded), ``"server"`` (the
            target's ``/tokenize``), a directory holding ``tokenizer.json``, a path to a
            ``tokenizer.json``, or a hub id such as ``meta-llama/Llama-3.1-8B-Instruct``,
            looked up in the local Hugging Face cache only.
        url: the target's base URL (``--url``), needed for ``server``.
        model: the model name (``-m``), needed for ``server``.
        headers: extra HTTP headers for ``server`` (e.g. the API key's Authorization).
        revision: with a hub id, the branch, tag or commit whose cached snapshot to use
            (``--tokenizer-revision``); ignored for paths, ``server`` and the default.

    Raises:
        TokenizerError: with a message that names ``--tokenizer`` and how to fix it.
    """
    if spec is None or spec.strip() in _DEFAULT_ALIASES:
        return default_tokenizer()
    spec = spec.strip()
    if spec == "server":
        if not url or not model:
            raise TokenizerError(
                "--tokenizer server needs the target's --url and -m/--model to call /tokenize"
            )
        return ServerTokenizer(url, model, headers=headers)
    path = Path(spec).expanduser()
    if path.is_dir():
        file = path / "tokenizer.json"
        if not file.is_file():
            raise TokenizerError(
                f"--tokenizer {spec}: directory has no tokenizer.json (only Hugging Face fast "
                "tokenizers are supported; save one with transformers' "
                "AutoTokenizer.from_pretrained(dir).save_pretrained(dir))"
            )
        return _from_file(file, spec)
    if path.is_file():
        return _from_file(path, spec)
    looks_like_path = spec.startswith((".", "/", "~")) or spec.endswith(".json")
    if not looks_like_path and _HUB_ID_RE.fullmatch(spec):
        cached = _from_hf_cache(spec, revision)
        if cached is not None:
            return _from_file(cached, spec)
        searched = ", ".join(str(d) for d in hf_cache_dirs())
        at = f" at revision {revision} (--tokenizer-revision)" if revision else ""
        raise TokenizerError(
            f"--tokenizer {spec}{at}: not a local path and not in the Hugging Face cache "
            f"(searched {searched}). llmbench never downloads tokenizers -- no model hub is "
            "reachable from here. Copy the model's tokenizer.json (or its whole directory) to "
            "this machine and pass --tokenizer /path/to/dir, use --tokenizer server to count "
            "with the target's /tokenize endpoint, or omit --tokenizer for the built-in "
            f"{DEFAULT_TOKENIZER_NAME}"
        )
    raise TokenizerError(
        f"--tokenizer {spec}: no such file or directory; pass a directory containing "
        "tokenizer.json, a tokenizer.json file, a cached hub id, 'server' or 'default'"
    )
