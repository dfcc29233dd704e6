"""Keeping the target's API key out of everything the runner writes, in every encoding.

The key reaches the runner pod through ``secretKeyRef`` and goes out only in the
``Authorization: Bearer`` header. It can come back in a server's answer (an error that echoes
the header or the request, a proxy's diagnostics), and from there into records, artefacts,
logs, the results ConfigMap and the termination message, which people with far fewer rights
than the Secret's readers can see. So every copy is replaced by :data:`REDACTED` where it is
written, in each form it could take there: as sent, JSON-escaped, URL-encoded (``quote`` and
``quote_plus``), and base64 (standard and URL-safe, at any alignment inside a longer base64
text, e.g. a Basic credential or an encoded header dump). ``Bearer <key>`` is covered by the
raw form.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "Scrubber", "encodings"]

#: What replaces the key (no quote, backslash or '%': a scrubbed JSON file stays JSON).
REDACTED = "[redacted]"
#: Shorter keys are not scrubbed: replacing two characters would shred every file.
MIN_LENGTH = 4


def _base64_cores(raw: bytes) -> list[str]:
    """The base64 text that every encoding of ``raw`` carries whatever bytes precede and
    follow it: for each of the three alignments, the characters that depend on ``raw``
    alone."""
    out: list[str] = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for shift in range(3):
            text = encode(b"\0" * shift + raw).decode().rstrip("=")
            lead = (shift * 4 + 2) // 3  # characters that also hold the preceding bytes
            tail = ((shift + len(raw)) * 4) // 3  # characters holding only known bits
            core = text[lead:tail]
            if len(core) >= 2 * MIN_LENGTH:
                out.append(core)
    return out


def encodings(secret: str) -> list[str]:
    """Every form of ``secret`` to look for, longest first (so a longer form is replaced
    before a shorter one inside it breaks it up)."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        *_base64_cores(secret.encode()),
    }
    return sorted((f for f in forms if len(f) >= MIN_LENGTH), key=len, reverse=True)


class Scrubber:
    """Replaces the API key, in every encoding, in text, bytes, files and log records."""

    def __init__(self, secret: str | None) -> None:
        self.forms = encodings(secret) if secret and len(secret) >= MIN_LENGTH else []
        self._bytes = [f.encode() for f in self.forms]

    def text(self, text: str) -> str:
        """``text`` without the key."""
        for form in self.forms:
            text = text.replace(form, REDACTED)
        return text

    def data(self, data: bytes) -> bytes:
        """``data`` without the key (any file: text, JSON, CSV, HTML, PNG metadata)."""
        for form in self._bytes:
            data = data.replace(form, REDACTED.encode())
        return data

    def tree(self, root: Path) -> list[Path]:
        """Rewrites every file under ``root`` (or ``root`` itself) that holds the key; the
        files rewritten. Run after each point's files are written, and once at the end."""
        if not self.forms or not root.exists():
            return []
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        changed = []
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            clean = self.data(data)
            if clean != data:
                path.write_bytes(clean)
                changed.append(path)
        return changed

    def install(self, logger: logging.Logger | None = None) -> None:
        """Scrubs every record the root logger's handlers emit (and ``logger``'s): the message
        is formatted, cleaned and frozen, so neither the format string nor an argument can
        carry the key out."""
        if not self.forms:
            return
        target = logger or logging.getLogger()
        for handler in target.handlers:
            if not any(isinstance(f, _LogFilter) for f in handler.filters):
                handler.addFilter(_LogFilter(self))


class _LogFilter(logging.Filter):
    def __init__(self, scrubber: Scrubber) -> None:
        super().__init__()
        self.scrubber = scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.scrubber.text(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrubber.text(record.exc_text)
        if clean != message:
            record.msg, record.args = clean, None
        return True
