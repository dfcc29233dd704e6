"""Build the embedded default tokenizer shipped as ``llmbench/tokenizer/data/tokenizer.json``.

Why: the runner must count tokens with no network (air-gapped clusters, no model hub), and
the counts must behave like a real LLM tokenizer (sub-word pieces, ~4 characters per token on
English prose), so we train a small byte-level BPE -- the same algorithm as GPT-2/Llama-3 --
once, and commit the result.

The corpus is English documentation text that ships with CPython itself
(``pydoc_data.topics``, the Python reference manual) plus the docstrings of a fixed list of
standard-library modules, so the build needs nothing but Python and ``tokenizers``.  The
trainer runs single-threaded and the inputs are sorted, so the output is byte-for-byte
reproducible for a given Python version and ``tokenizers`` version; both, with the file's
SHA-256, are recorded next to it in ``llmbench/tokenizer/data/tokenizer.build.json`` (and a
test rebuilds and compares when it runs under those versions).

Usage::

    .venv/bin/python hack/build_tokenizer.py            # writes the shipped tokenizer.json
    .venv/bin/python hack/build_tokenizer.py --check    # rebuilds in memory, compares
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path

# Single-threaded training: rayon's work split must not influence tie-breaking.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

VOCAB_SIZE = 8192
SPECIAL_TOKENS = ["<|endoftext|>"]
DATA = Path(__file__).resolve().parent.parent / "llmbench" / "tokenizer" / "data"
OUT = DATA / "tokenizer.json"
META = DATA / "tokenizer.build.json"

# Prose-heavy stdlib modules; the list is fixed so the corpus does not depend on what else
# happens to be installed.
DOC_MODULES = [
    "argparse", "asyncio", "collections", "contextlib", "csv", "dataclasses", "datetime",
    "decimal", "email", "enum", "fractions", "functools", "heapq", "http.client",
    "http.server", "inspect", "io", "itertools", "json", "logging", "math", "os",
    "pathlib", "pickle", "random", "re", "shutil", "socket", "sqlite3", "statistics",
    "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "typing",
    "unittest", "urllib.parse", "uuid", "zipfile",
]


def corpus() -> Iterator[str]:
    """Yield the training text in a fixed order."""
    from pydoc_data import topics

    for key in sorted(topics.topics):
        yield topics.topics[key]
    for name in DOC_MODULES:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module) or ""]
        for attr in sorted(vars(module)):
            if attr.startswith("_"):
                continue
            obj = getattr(module, attr)
            if getattr(obj, "__module__", None) == module.__name__:
                docs.append(inspect.getdoc(obj) or "")
        yield "\n\n".join(d for d in docs if d)


def build() -> Tokenizer:
    """Train the byte-level BPE.

    Byte-level pre-tokenisation (GPT-2's regex) keeps a space attached to the word after it,
    which is what makes " word" single tokens -- the simulator streams those, and the
    workload builds prompts of an exact token count from them.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus()), trainer=trainer)
    return tok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file")
    args = parser.parse_args()
    tok = build()
    text = tok.to_str(pretty=False) + "\n"
    meta = {
        "python": platform.python_version(),
        "tokenizers": importlib.import_module("tokenizers").__version__,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "vocab_size": tok.get_vocab_size(),
        "model": "byte-level BPE (GPT-2 pre-tokenizer regex), no special-token post-processing",
        "corpus": "pydoc_data.topics + docstrings of DOC_MODULES in hack/build_tokenizer.py",
    }
    print(json.dumps(meta), f"{len(text.encode())} bytes", file=sys.stderr)
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("identical" if same else "DIFFERS from committed file", file=sys.stderr)
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    META.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT} and {META}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
