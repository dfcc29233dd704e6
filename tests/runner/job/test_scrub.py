"""The runner keeps the API key out of everything it writes, in every encoding.

A scripted loopback target answers the preflight and half the load requests normally and the
other half with a 500 whose body echoes the key as a careless proxy would: raw, in a
``Bearer`` header dump, JSON-escaped, URL-encoded and base64-encoded (standard and URL-safe,
inside a Basic credential). The key holds characters each encoding changes (``"``, ``/``,
``+``, ``&``, ``=``, a space), so every form is distinct. ``llmbench job`` runs a two-point
sweep with a persisted artefact folder and its own log; every file it wrote and the log are
then searched for each form.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from scripted_server import STREAM_HEAD, ScriptedServer, Step, stream_events

from llmbench.api.job import CONTEXT_KEY, ENV_API_KEY, SPEC_KEY, RunContext
from llmbench.runner.job.main import run_job
from llmbench.runner.job.scrub import REDACTED, Scrubber, encodings
from llmbench.runner.job.store import DirStore

KEY = 'sk-live/"quoted"+plus&eq=9f8e 7d6c5b4a'
FORMS = {
    "raw": KEY,
    "json": json.dumps(KEY)[1:-1],
    "url": quote(KEY, safe=""),
    "url-plus": quote_plus(KEY, safe=""),
    # as a Basic credential and alone: two alignments, two alphabets
    "base64": base64.b64encode(f"user:{KEY}".encode()).decode(),
    "urlsafe base64": base64.urlsafe_b64encode(KEY.encode()).decode(),
}


def test_the_forms_differ_and_each_one_is_found() -> None:
    assert len(set(FORMS.values())) == len(FORMS)
    scrubber = Scrubber(KEY)
    for name, form in FORMS.items():
        assert form not in scrubber.text(f"x{form}y"), name
    # base64 at every alignment, in both alphabets
    for lead in (b"", b"a", b"ab", b"abc"):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            blob = encode(lead + KEY.encode() + b"tail").decode()
            assert REDACTED in scrubber.text(blob), (lead, encode)
    assert scrubber.text(f"Authorization: Bearer {KEY}") == f"Authorization: Bearer {REDACTED}"
    assert Scrubber("abc").text("abc") == "abc"  # too short to scrub anything safely
    assert encodings(KEY)[0] == max(encodings(KEY), key=len)


def echo_body() -> bytes:
    text = (f"upstream refused: key={KEY}; headers=Authorization: Bearer {KEY}; "
            f"query=api_key={FORMS['url']}&k={FORMS['url-plus']}; "
            f"basic={FORMS['base64']}; b64={FORMS['urlsafe base64']}")
    # json.dumps escapes the key's quotes: the JSON-escaped form is what goes on the wire
    return json.dumps({"error": {"message": text, "type": "upstream", "code": 500}}).encode()


def script(n: int, request: bytes) -> list[Step]:
    if request.startswith(b"GET /v1/models"):
        body = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
    elif b'"max_tokens": 1,' in request or b'"max_tokens":1,' in request or n % 2 == 0:
        events = stream_events(4)
        return [STREAM_HEAD, b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events),
                b"0\r\n\r\n"]
    else:
        body = echo_body()
        return [b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)]
    return [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)]


def test_no_file_the_runner_wrote_and_no_log_line_holds_the_key_in_any_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = ScriptedServer(script).start()
    try:
        monkeypatch.setenv(ENV_API_KEY, KEY)
        store = DirStore(tmp_path / "store")
        store.write({
            SPEC_KEY: json.dumps({
                "target": {"url": server.url, "apiKeySecretRef": {"name": "s", "key": "k"}},
                "workload": {"inputTokens": {"mean": 16}, "outputTokens": {"mean": 4}},
                "load": {"requestCount": 8, "warmupRequestCount": 0},
                "sweep": {"type": "concurrency", "values": [1.0, 2.0]},
            }),
            CONTEXT_KEY: RunContext(benchmark="b", namespace="llm", run=1, url=server.url,
                                    api_key_env=ENV_API_KEY).model_dump_json(
                by_alias=True, exclude_none=True),
        })
        art, persist, term = tmp_path / "art", tmp_path / "claim", tmp_path / "term"
        with caplog.at_level(logging.DEBUG):
            run_job(store, art, termination_log=term, stop=asyncio.Event(),
                    persist_dir=persist)
    finally:
        server.stop()
    files = [p for root in (tmp_path / "store", art, persist, term)
             for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file()]
    assert len(files) > 10, files
    for path in files:
        data = path.read_bytes()
        for name, form in FORMS.items():
            assert form.encode() not in data, f"the key ({name}) leaked into {path}"
    echoed = [p for p in files if REDACTED.encode() in p.read_bytes()]
    assert echoed, "the server's echo reached no file: the test shows nothing"
    log = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert log
    for name, form in FORMS.items():
        assert form not in log, f"the key ({name}) leaked into the log"
