"""Tokenizers from local files only: shared by the runner (prompt lengths, OSL fallback) and the
simulator (usage counts), so neither depends on the other."""

from llmbench.tokenizer.loader import (
    DEFAULT_TOKENIZER_NAME,
    HFTokenizer,
    ServerTokenizer,
    Tokenizer,
    TokenizerError,
    default_tokenizer,
    load_tokenizer,
)

__all__ = [
    "DEFAULT_TOKENIZER_NAME",
    "HFTokenizer",
    "ServerTokenizer",
    "Tokenizer",
    "TokenizerError",
    "default_tokenizer",
    "load_tokenizer",
]
