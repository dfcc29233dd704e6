"""Before any load: the target answers, serves the run's models and takes the run's request.

Why a step of its own: a wrong URL, model, endpoint or request field would otherwise show as a
point in which every request failed (or as a timeout); checked first, it fails in seconds with
an error naming the flag to fix. :func:`preflight` runs once per point (and once before a
sweep, to name the model), in a thread: it is synchronous httpx.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from llmbench.runner.client.transport import Target
from llmbench.runner.point.config import ProfileConfig

__all__ = [
    "PREFLIGHT_CONNECT_TIMEOUT_S",
    "PROBE_ATTEMPTS",
    "PROBE_NOTICE_S",
    "ROUTE_RETRY_S",
    "ProfileError",
    "not_routed",
    "preflight",
    "probe_body",
    "probe_request",
]


log = logging.getLogger("llmbench.preflight")


class ProfileError(Exception):
    """A problem found before any load was sent; the message names the flag or URL to fix."""


#: Seconds to wait for a TCP connection during preflight: an unreachable URL fails fast even
#: with a long --request-timeout (which bounds the rest of each preflight call).
PREFLIGHT_CONNECT_TIMEOUT_S = 10.0
#: Seconds between the console lines saying what a probe still waits for.
PROBE_NOTICE_S = 5.0
#: Seconds between tries of a refused connection while ``cfg.route_wait_s`` lasts.
ROUTE_RETRY_S = 0.5
#: Bytes of a probe response read at most (one token is asked for; a runaway answer is cut).
_PROBE_MAX_BYTES = 1 << 20


def _timeout(cfg: ProfileConfig, timeout: float | None) -> httpx.Timeout:
    """``timeout`` or the run's ``--request-timeout`` (None: none), connecting capped."""
    total = cfg.load.request_timeout_s if timeout is None else timeout
    connect = PREFLIGHT_CONNECT_TIMEOUT_S
    if total is not None:
        connect = min(total, connect)
    return httpx.Timeout(total, connect=connect)


def preflight(cfg: ProfileConfig, timeout: float | None = None, *, probe: bool = True) -> str:
    """Checks the target before any load; returns the model the run will name.

    Two steps, each failing with a :class:`ProfileError` that names what to fix:

    1. ``GET /v1/models``: the URL answers and serves every model of the run (the first one
       listed when ``-m`` is not given). A server without ``/v1/models`` is accepted when
       ``-m`` is given.
    2. with ``probe``: one real request of the run's kind (:func:`probe_request`), so a wrong
       ``--endpoint``, endpoint type, model or request field fails here, naming what the
       server answered, instead of as a run in which every request failed.

    ``/v1/models`` has a bound of its own, ``cfg.preflight_timeout_s``
    (``--preflight-timeout``, default 10 s), whatever ``--request-timeout`` says: listing
    models is instant on a server that serves at all, so a silent one (it accepts connections
    and never answers) fails in seconds, with an error naming the URL and what did and did
    not answer. The probe may rightly take longer (a cold model): it is bounded by
    ``timeout``, default the run's ``--request-timeout``, and says what it waits for every
    :data:`PROBE_NOTICE_S` seconds.
    """
    target = Target.from_url(cfg.url, cfg.path())
    models_url = target.base_url.rstrip("/")
    models_url = (
        models_url[: -len("/v1")] if models_url.endswith("/v1") else models_url
    ) + "/v1/models"
    bound = cfg.preflight_timeout_s
    try:
        resp = _get_models(cfg, models_url, bound)
    except httpx.ConnectTimeout as exc:
        raise ProfileError(
            f"cannot reach {target.base_url} (--url): no TCP connection to "
            f"{target.host}:{target.port} within {min(bound, PREFLIGHT_CONNECT_TIMEOUT_S):g} s"
        ) from exc
    except httpx.TimeoutException as exc:
        raise ProfileError(
            f"{target.base_url} (--url) accepted a TCP connection but did not answer "
            f"GET {models_url} within {bound:g} s (--preflight-timeout); no probe or load "
            "was sent. Is this the inference server's HTTP port, and is it serving "
            "(not stuck or still loading behind a proxy)?"
        ) from exc
    except httpx.HTTPError as exc:
        tried = (
            f" (tried for {cfg.route_wait_s:g} s: a Service may not route yet)"
            if cfg.route_wait_s > 0 and not_routed(exc) else ""
        )
        raise ProfileError(f"cannot reach {target.base_url} (--url): {exc}{tried}") from exc
    if resp.status_code in (401, 403):
        raise ProfileError(
            f"{models_url} answered {resp.status_code}: pass an API key "
            "(--api-key-env NAME or --api-key-file PATH)"
        )
    served: list[str] = []
    if resp.status_code == 200:
        try:
            served = [m["id"] for m in resp.json().get("data", []) if "id" in m]
        except (ValueError, AttributeError, TypeError):
            served = []
    wanted = cfg.models()
    if not wanted:
        if not served:
            raise ProfileError(f"{models_url} lists no models: pass -m/--model")
        model = served[0]
    else:
        model = cfg.model or wanted[0]
        missing = [m for m in wanted if m not in served]
        if served and missing:
            raise ProfileError(
                f"model {', '.join(repr(m) for m in missing)} (-m/--model) is not served by "
                f"{target.base_url}; it serves: {', '.join(served)}"
            )
    if probe:
        answered = f"GET {models_url} answered HTTP {resp.status_code}"
        for name in wanted or [model]:
            _probe_with_notices(cfg, name, timeout, answered)
    return model


def _get_models(cfg: ProfileConfig, models_url: str, bound: float) -> httpx.Response:
    """``GET /v1/models``, a refused or unresolvable connection tried again every
    :data:`ROUTE_RETRY_S` until ``cfg.route_wait_s`` has passed (once when it is 0)."""
    deadline = time.monotonic() + cfg.route_wait_s
    said = False
    while True:
        try:
            return httpx.get(
                models_url,
                headers=cfg.auth_headers(),
                timeout=httpx.Timeout(bound, connect=min(bound, PREFLIGHT_CONNECT_TIMEOUT_S)),
            )
        except httpx.ConnectError as exc:
            if not not_routed(exc) or time.monotonic() + ROUTE_RETRY_S > deadline:
                raise
            if not said:
                log.info(
                    "preflight: %s: %s; trying again for up to %g s (a Service can route "
                    "after its pods are Ready)", models_url, exc, cfg.route_wait_s,
                )
                said = True
            time.sleep(ROUTE_RETRY_S)


def not_routed(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a refused connection or a name that does not
    resolve (yet): what a Service looks like before its route or DNS record exists."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (ConnectionRefusedError, socket.gaierror)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _probe_with_notices(
    cfg: ProfileConfig, model: str, timeout: float | None, answered: str
) -> None:
    """:func:`probe_request` in a thread of its own, saying on the console every
    :data:`PROBE_NOTICE_S` seconds what it still waits for, so a slow or silent probe is
    never a silent wait of up to ``--request-timeout``."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            probe_request(cfg, model, timeout)
        except BaseException as exc:  # handed to the waiting thread, raised there
            failure.append(exc)

    worker = threading.Thread(target=run, name="llmbench-probe", daemon=True)
    began = time.monotonic()
    worker.start()
    limit = cfg.load.request_timeout_s if timeout is None else timeout
    of = f" of {limit:g} s (--request-timeout)" if limit is not None else ""
    while True:
        worker.join(PROBE_NOTICE_S)
        if not worker.is_alive():
            break
        log.info(
            "preflight: waiting %.0f s%s for the probe request (model %r, one output token) "
            "to %s to answer; %s",
            time.monotonic() - began, of, model, _probe_url(cfg), answered,
        )
    if failure:
        raise failure[0]


def probe_body(cfg: ProfileConfig, model: str) -> dict[str, Any]:
    """The probe's body: the run's shape (endpoint type, streaming, extra inputs) and model,
    a one-word prompt and one output token."""
    body: dict[str, Any] = {"model": model}
    if cfg.endpoint_type == "embeddings":
        body["input"] = "Hello"
    else:
        if cfg.endpoint_type == "chat":
            body["messages"] = [{"role": "user", "content": "Hello"}]
        else:
            body["prompt"] = "Hello"
        body["stream"] = cfg.streaming
        if cfg.streaming:
            body["stream_options"] = {"include_usage": True}
    body.update(cfg.workload.extra_inputs)
    if cfg.endpoint_type != "embeddings":
        body.pop("min_tokens", None)
        body["max_tokens"] = 1
        if "max_completion_tokens" in body:
            body["max_completion_tokens"] = 1
    return body


def _probe_problem(cfg: ProfileConfig, content_type: str, text: str) -> str | None:
    """What is wrong with a 2xx probe answer for this run's kind, or None if it fits."""
    want = "data" if cfg.endpoint_type == "embeddings" else "choices"
    if cfg.streaming:
        events = [
            line[5:].strip() for line in text.splitlines() if line.startswith("data:")
        ]
        payloads = [e for e in events if e and e != "[DONE]"]
        if not payloads:
            return (
                f"it answered {content_type or 'no content type'} without SSE 'data:' events "
                "(a streamed reply was asked for; pass --no-streaming if the server cannot "
                "stream)"
            )
        for raw in payloads:
            try:
                event = json.loads(raw)
            except ValueError:
                return f"an SSE event is not JSON: {raw[:200]!r}"
            if isinstance(event, dict) and "error" in event:
                return f"it streamed an error: {json.dumps(event['error'])[:300]}"
        first = json.loads(payloads[0])
        if not isinstance(first, dict) or want not in first:
            return f"its first SSE event has no {want!r}: {payloads[0][:200]!r}"
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return f"it answered {content_type or 'no content type'}, not JSON: {text[:200]!r}"
    if not isinstance(doc, dict) or want not in doc:
        return f"its JSON answer has no {want!r}: {text[:200]!r}"
    return None


#: Probe attempts: a 429, a 5xx, a dropped connection or a garbled answer is tried again (a
#: server under other load, or a flaky one, should not stop a run); other 4xx answers are
#: the request's fault and fail at once.
PROBE_ATTEMPTS = 5


def probe_request(cfg: ProfileConfig, model: str, timeout: float | None = None) -> None:
    """Sends one request of the run's kind (:func:`probe_body`) and checks the answer.

    Raises:
        ProfileError: naming the URL, the settings that shape the request, and what the
            server answered (status and the start of its body).
    """
    error = ""
    for attempt in range(PROBE_ATTEMPTS):
        if attempt:
            time.sleep(0.1 * attempt)
        error, final = _probe_once(cfg, model, timeout)
        if not error:
            return
        if final:
            break
    raise ProfileError(error)


def _probe_url(cfg: ProfileConfig) -> str:
    """Exactly where the run sends its requests."""
    target = Target.from_url(cfg.url, cfg.path())
    origin = urlsplit(target.base_url)
    return f"{origin.scheme}://{origin.netloc}{target.path}"


def _probe_once(cfg: ProfileConfig, model: str, timeout: float | None) -> tuple[str, bool]:
    """One probe: ``("", True)`` when it fits the run, else (the error, whether it is final)."""
    url = _probe_url(cfg)
    what = (
        f"--endpoint-type {cfg.endpoint_type}, model {model!r}, "
        f"{'streaming' if cfg.streaming else 'not streaming'}"
    )
    headers = {**cfg.auth_headers(), "Content-Type": "application/json"}
    chunks: list[bytes] = []
    try:
        body = probe_body(cfg, model)
        limit = _timeout(cfg, timeout)
        with httpx.stream("POST", url, headers=headers, json=body, timeout=limit) as resp:
            size = 0
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= _PROBE_MAX_BYTES:
                    break
            status, ctype = resp.status_code, resp.headers.get("content-type", "")
    except httpx.HTTPError as exc:
        return f"probe request to {url} ({what}) failed: {exc}", False
    text = b"".join(chunks).decode("utf-8", "replace").strip()
    if not 200 <= status < 300:
        hint = {
            401: "pass an API key (--api-key-env NAME or --api-key-file PATH)",
            403: "pass an API key (--api-key-env NAME or --api-key-file PATH)",
            404: "check --endpoint and --endpoint-type (and -m/--model)",
            405: "check --endpoint and --endpoint-type",
        }.get(status, "check --endpoint, --endpoint-type, -m/--model and --extra-inputs")
        final = 400 <= status < 500 and status not in (408, 429)
        return (
            f"probe request to {url} ({what}) answered HTTP {status}: {text[:300]!r}; {hint}",
            final,
        )
    problem = _probe_problem(cfg, ctype, text)
    if problem is not None:
        return (
            f"probe request to {url} ({what}): {problem}; check --endpoint and --endpoint-type",
            False,
        )
    return "", True
