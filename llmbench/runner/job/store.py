"""Where a runner Job reads its spec and writes its results: the run's ConfigMap, or a folder.

Why an interface with two homes: in the cluster the results ConfigMap is the whole API between
the runner and the operator (:mod:`llmbench.api.job`), and the runner's service account may
``get``/``update``/``patch`` that one object and nothing else. Locally and in tests the same
keys live as files in a directory, so the job loop is exercised end to end without a cluster.

:class:`ConfigMapStore` is a deliberately small client: ``GET`` the object, ``PATCH`` its
``data`` with a JSON merge patch (only the keys given change, so the operator's ``spec.json``
and ``context.json`` are never rewritten and no ``resourceVersion`` dance is needed). It uses
httpx and the pod's service-account files (token, CA), not the ``kubernetes`` package, so the
runner keeps importing no Kubernetes client. Transient answers (409, 429, 5xx, connection
errors) are retried with bounded, jittered exponential backoff; anything else is a
:class:`StoreError` naming the ConfigMap, the verb and the HTTP status. The bearer token is
read from its file for every call (the kubelet rotates projected tokens) and never appears in
a message or a log line.
"""

from __future__ import annotations

import logging
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx

__all__ = [
    "DEFAULT_SERVICE_ACCOUNT_DIR",
    "ConfigMapStore",
    "DirStore",
    "ResultsStore",
    "StoreError",
]

log = logging.getLogger("llmbench.job")

DEFAULT_SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: ConfigMap keys: what the API server accepts (``[-._a-zA-Z0-9]+``).
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
#: Answers worth another try: a conflict, throttling, or the server (or a proxy) in trouble.
_RETRY_STATUS = frozenset({409, 429, 500, 502, 503, 504})


class StoreError(Exception):
    """A read or write of the results store failed; the message names the store and why.

    ``status`` is the HTTP status when the API server answered (``None`` for a connection
    error or a local file problem).
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ResultsStore(Protocol):
    """The results ConfigMap's ``data`` as the runner sees it: read it all, merge keys in."""

    def read(self) -> dict[str, str]:
        """Every key and its value (empty when there is no data yet)."""
        ...

    def write(self, updates: Mapping[str, str | None]) -> None:
        """Sets the given keys in one operation (a key given None is removed); other keys
        keep their values."""
        ...

    def delete(self, keys: Iterable[str]) -> None:
        """Removes the given keys in one operation (a missing key is no error); others stay."""
        ...


def _check_keys(keys: Any, where: str) -> None:
    for key in keys:
        if not _KEY.match(key) or key in (".", ".."):
            raise StoreError(f"{where}: {key!r} is not a valid ConfigMap key ([-._a-zA-Z0-9]+)")


class DirStore:
    """One file per key in a directory: the results store of a local run and of the tests.

    Each key is written atomically (write to a temporary file named after the writing
    process, then rename), so several processes may write and delete different keys of one
    folder at once (the shards of a local several-pod run do); a write of several keys is not
    one transaction.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def __str__(self) -> str:
        return f"directory {self.directory}"

    def read(self) -> dict[str, str]:
        """Every regular file whose name is a valid key (temporary files left out)."""
        if not self.directory.is_dir():
            raise StoreError(f"{self}: not a directory")
        out: dict[str, str] = {}
        for path in sorted(self.directory.iterdir()):
            if path.is_file() and _KEY.match(path.name) and not path.name.endswith(".tmp"):
                try:
                    out[path.name] = path.read_text(encoding="utf-8")
                except FileNotFoundError:
                    continue  # deleted by another process since the listing
                except OSError as exc:
                    raise StoreError(f"{self}: cannot read {path.name}: {exc}") from None
        return out

    def write(self, updates: Mapping[str, str | None]) -> None:
        """Writes each key to its file (None: removes it)."""
        _check_keys(updates, str(self))
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for key, value in updates.items():
                if value is None:
                    (self.directory / key).unlink(missing_ok=True)
                    continue
                tmp = self.directory / f"{key}.{os.getpid()}.tmp"
                tmp.write_text(value, encoding="utf-8", newline="")
                os.replace(tmp, self.directory / key)
        except OSError as exc:
            raise StoreError(f"{self}: cannot write: {exc}") from None

    def delete(self, keys: Iterable[str]) -> None:
        """Removes each key's file (one already gone is fine)."""
        keys = list(keys)
        _check_keys(keys, str(self))
        try:
            for key in keys:
                (self.directory / key).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"{self}: cannot delete: {exc}") from None


def _server_from_env() -> str | None:
    """``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` (what every pod gets)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    if not host:
        return None
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"https://{host}:{port}"


class ConfigMapStore:
    """The run's results ConfigMap through the API server, with the pod's credentials.

    Args:
        name: the ConfigMap (``<benchmark>-run-<n>``).
        namespace: its namespace.
        server: the API server's base URL; default from ``KUBERNETES_SERVICE_HOST`` and
            ``KUBERNETES_SERVICE_PORT`` (tests pass the test cluster's URL).
        service_account_dir: where ``token`` and ``ca.crt`` are (the pod's mount by default).
        timeout_s: per request.
        attempts: tries per operation, the first included (transient failures only).
        backoff_s, max_backoff_s: the jittered exponential backoff between tries: a random
            sleep up to ``min(max_backoff_s, backoff_s * 2**try)``.
        sleep: injectable for tests that want no real waiting.
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        *,
        server: str | None = None,
        service_account_dir: Path = DEFAULT_SERVICE_ACCOUNT_DIR,
        timeout_s: float = 10.0,
        attempts: int = 7,
        backoff_s: float = 0.25,
        max_backoff_s: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.service_account_dir = Path(service_account_dir)
        self._server = server.rstrip("/") if server else None
        self.timeout_s = timeout_s
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    def __str__(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        """The object's API path."""
        return f"/api/v1/namespaces/{self.namespace}/configmaps/{self.name}"

    def read(self) -> dict[str, str]:
        """``data`` of the ConfigMap (``{}`` when it has none)."""
        body = self._call("GET", None)
        data = body.get("data") or {}
        if not isinstance(data, dict):
            raise StoreError(f"{self}: GET answered a ConfigMap whose data is not a mapping")
        return {str(k): str(v) for k, v in data.items()}

    def write(self, updates: Mapping[str, str | None]) -> None:
        """One merge patch of ``data``: the given keys set (None: removed, RFC 7386), every
        other key kept."""
        _check_keys(updates, str(self))
        if updates:
            self._call("PATCH", {"data": dict(updates)})

    def delete(self, keys: Iterable[str]) -> None:
        """One merge patch setting the keys to ``null``, which removes them (RFC 7386)."""
        keys = list(keys)
        _check_keys(keys, str(self))
        if keys:
            self._call("PATCH", {"data": dict.fromkeys(keys)})

    # -- the HTTP part ----------------------------------------------------------------------

    def _base_url(self) -> str:
        server = self._server or _server_from_env()
        if server is None:
            raise StoreError(
                f"{self}: no API server: KUBERNETES_SERVICE_HOST is not set (not in a pod?); "
                "pass --server URL, or --store-dir DIR for a local run"
            )
        return server

    def _headers(self, method: str) -> dict[str, str]:
        token_file = self.service_account_dir / "token"
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise StoreError(
                f"{self}: cannot read the service-account token {token_file}: "
                f"{exc.strerror or exc}"
            ) from None
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        return headers

    def _verify(self) -> ssl.SSLContext | bool:
        ca = self.service_account_dir / "ca.crt"
        if not ca.is_file():
            if self._base_url().startswith("https://"):
                raise StoreError(f"{self}: the API server's CA {ca} is missing")
            return False  # plain http: nothing to verify (a local proxy)
        try:
            return ssl.create_default_context(cafile=str(ca))
        except (OSError, ssl.SSLError) as exc:
            raise StoreError(f"{self}: cannot load the CA {ca}: {exc}") from None

    def _call(self, method: str, body: Mapping[str, Any] | None) -> dict[str, Any]:
        """One API call with retries; the decoded JSON object, or :class:`StoreError`."""
        url = self._base_url() + self.path
        verify = self._verify()
        last = ""
        status: int | None = None
        wait_hint: float | None = None
        with httpx.Client(verify=verify, timeout=self.timeout_s) as client:
            for attempt in range(self.attempts):
                if attempt:
                    self._pause(attempt, wait_hint)
                    wait_hint = None
                try:
                    resp = client.request(
                        method, url, headers=self._headers(method), json=body
                    )
                except httpx.TransportError as exc:
                    status, last = None, f"{type(exc).__name__}: {exc}"
                    log.warning("%s: %s failed (%s); retrying", self, method, last)
                    continue
                if resp.status_code < 300:
                    try:
                        decoded = resp.json()
                    except ValueError:
                        raise StoreError(
                            f"{self}: {method} answered {resp.status_code} with a body that is "
                            "not JSON", resp.status_code
                        ) from None
                    if not isinstance(decoded, dict):
                        raise StoreError(
                            f"{self}: {method} answered {resp.status_code} with JSON that is not "
                            "an object", resp.status_code
                        )
                    return decoded
                status, last = resp.status_code, _describe(resp)
                if status not in _RETRY_STATUS:
                    raise StoreError(f"{self}: {method} answered {last}", status)
                wait_hint = _retry_after(resp) if status == 429 else None
                log.warning("%s: %s answered %s; retrying", self, method, last)
        raise StoreError(
            f"{self}: {method} failed after {self.attempts} attempts; last: {last}", status
        )

    def _pause(self, attempt: int, retry_after: float | None) -> None:
        """Sleeps before try ``attempt``: jittered exponential backoff, bounded; a 429's
        ``Retry-After`` is honoured up to the same bound."""
        cap = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        delay = random.uniform(cap / 2, cap)
        if retry_after is not None:
            delay = min(self.max_backoff_s, max(delay, retry_after))
        self._sleep(delay)


def _describe(resp: httpx.Response) -> str:
    """``403 Forbidden: <the API server's message>`` (a Status object's ``message``)."""
    text = f"{resp.status_code} {resp.reason_phrase}".strip()
    try:
        body = resp.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(message, str) and message:
        text += f": {message[:500]}"
    return text


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
