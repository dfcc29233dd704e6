"""Every Kubernetes API call the operator makes, and the RBAC each one needs.

Why one module: least privilege is checked, not hoped for. Each method declares the
(API group, resource, verb) it uses with :func:`uses`; :data:`PERMISSIONS` collects them, and
a test compares that table with ``deploy/operator-rbac.yaml`` both ways (nothing missing,
nothing extra). The ``kubernetes`` client is synchronous, so every call runs in a worker thread
and kopf's event loop never blocks on the network.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from llmbench.api import GROUP, PLURAL, VERSION

__all__ = ["PERMISSIONS", "PRUNED_KINDS", "Kube", "NotFound", "Refused", "uses"]

P = ParamSpec("P")
T = TypeVar("T")

#: (apiGroup, resource) -> verbs. Filled by :func:`uses`, plus what kopf itself calls.
PERMISSIONS: dict[tuple[str, str], set[str]] = {
    # kopf: watch the resource, keep its progress annotations, post its own warnings as
    # events (the operator's own Events: :meth:`Kube.create_event`).
    (GROUP, PLURAL): {"list", "watch", "patch"},
    ("", "events"): {"create"},
    # kopf.on.event watches of the children (stateless: no patch rights on Pods or Jobs).
    ("", "configmaps"): {"list", "watch"},
    ("batch", "jobs"): {"list", "watch"},
    ("", "pods"): {"list", "watch"},
    # Held only to grant them: RBAC lets a Role grant nothing its creator lacks, and the
    # runner's Role grants get/update/patch on its results ConfigMap.
    ("", "configmaps#grant"): {"get", "update", "patch"},
}

#: Who wrote status, in managedFields (GitOps tools show it next to their own spec manager).
FIELD_MANAGER = "llmbench-operator"

#: Request timeout (seconds) of every call: a hung API server must not hang a handler.
TIMEOUT = 30.0


def uses(group: str, resource: str, verb: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Declares the permission a method needs (recorded in :data:`PERMISSIONS`)."""
    PERMISSIONS.setdefault((group, resource), set()).add(verb)

    def mark(fn: Callable[P, T]) -> Callable[P, T]:
        return fn

    return mark


class NotFound(Exception):
    """The object does not exist (404)."""


class Refused(Exception):
    """The API server refused to create an object for good: 400, 403 or 422 (a quota, an
    admission policy, a field it will not take), or 409 with an object of that name that this
    benchmark does not own. The same request cannot succeed: the run ends and says why
    (``message``: the API server's own words)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: Answers to a create that no retry can turn into a success.
REFUSALS = (400, 403, 422)


def server_message(exc: ApiException) -> str:
    """The ``message`` of the API server's ``Status`` body (its reason phrase without one)."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{exc.status} {exc.reason}"


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controlling owner (None without one)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and (exc.status in (409, 429) or exc.status >= 500)


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs a blocking client call in a thread; 404 -> :class:`NotFound`; 429/5xx retried with
    jittered backoff (a few times), so a status write is not lost to a blip."""
    kwargs.setdefault("_request_timeout", TIMEOUT)
    delay = 0.2
    for attempt in range(5):
        try:
            return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
        except ApiException as exc:
            if exc.status == 404:
                raise NotFound(str(exc.reason)) from None
            if attempt == 4 or not _is_retryable(exc) or exc.status == 409:
                raise
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")


def _dict(api: k8s.ApiClient, obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    out: dict[str, Any] = api.sanitize_for_serialization(obj)
    return out


_CREATE: dict[str, tuple[str, str]] = {
    "ConfigMap": ("", "configmaps"),
    "ServiceAccount": ("", "serviceaccounts"),
    "Role": ("rbac.authorization.k8s.io", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
    "Job": ("batch", "jobs"),
    "Lease": ("coordination.k8s.io", "leases"),
}
for _group, _resource in _CREATE.values():
    PERMISSIONS.setdefault((_group, _resource), set()).add("create")
#: A pruned run's objects (spec.historyLimit); the Lease is released by the same verb. These
#: are also the objects with the benchmark as controlling owner: an existing one (409) is read
#: to compare its owner's uid.
PRUNED_KINDS = ("ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Job")
for _kind in PRUNED_KINDS:
    PERMISSIONS.setdefault(_CREATE[_kind], set()).update({"delete", "get"})


class Kube:
    """The operator's API calls (async, thread-offloaded), each with its declared permission."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.core = k8s.CoreV1Api(api)
        self.batch = k8s.BatchV1Api(api)
        self.rbac = k8s.RbacAuthorizationV1Api(api)
        self.coord = k8s.CoordinationV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.admission = k8s.AdmissionregistrationV1Api(api)

    # -- the benchmark ------------------------------------------------------------------

    @uses(GROUP, PLURAL, "get")
    async def get_benchmark(self, namespace: str, name: str) -> dict[str, Any]:
        """The benchmark as the API server has it now (handlers decide from this, not from
        the event that woke them)."""
        obj = await _call(
            self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name
        )
        out: dict[str, Any] = obj
        return out

    @uses(GROUP, f"{PLURAL}/status", "patch")
    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """A JSON merge patch of ``status`` (lists are replaced whole; None deletes a key)."""
        await _call(
            self.custom.patch_namespaced_custom_object_status,
            GROUP, VERSION, namespace, PLURAL, name, {"status": dict(status)},
            field_manager=FIELD_MANAGER,
        )

    # -- references ---------------------------------------------------------------------

    @uses("", "services", "get")
    async def get_service(self, namespace: str, name: str) -> dict[str, Any]:
        """The target Service (its ports and selector)."""
        return _dict(self.api, await _call(self.core.read_namespaced_service, name, namespace))

    @uses("", "pods", "list")
    async def list_pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        """Pods matching a label selector, in one namespace or (None) every namespace."""
        if namespace is None:
            res = await _call(self.core.list_pod_for_all_namespaces, label_selector=selector)
        else:
            res = await _call(self.core.list_namespaced_pod, namespace, label_selector=selector)
        return [_dict(self.api, p) for p in res.items]

    @uses("", "nodes", "get")
    async def get_node(self, name: str) -> dict[str, Any]:
        """A node (labels for the GPU snapshot, taints for the runner's tolerations)."""
        return _dict(self.api, await _call(self.core.read_node, name))

    # -- the admission policy (is the creator's authorization checked?) ------------------

    @uses("admissionregistration.k8s.io", "validatingadmissionpolicies", "get")
    async def get_admission_policy(self, name: str) -> dict[str, Any]:
        """The ValidatingAdmissionPolicy that checks a benchmark's creator's rights."""
        return _dict(self.api, await _call(self.admission.read_validating_admission_policy, name))

    @uses("admissionregistration.k8s.io", "validatingadmissionpolicybindings", "get")
    async def get_admission_binding(self, name: str) -> dict[str, Any]:
        """The binding that puts that policy in force."""
        return _dict(
            self.api, await _call(self.admission.read_validating_admission_policy_binding, name)
        )

    # -- children -----------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> bool:
        """Creates an object (``dry_run``: the API server checks it, admission included, and
        stores nothing); False when it exists already (409: made by an earlier attempt).

        Raises :class:`Refused` on 400/403/422, and on 409 when ``obj`` names a controlling
        owner and the existing object's is another (a benchmark never adopts what it did not
        create: a Job forged under its run's name is not its run).
        """
        kind, ns = obj["kind"], obj["metadata"]["namespace"]
        body = dict(obj)
        methods: dict[str, Callable[..., Any]] = {
            "ConfigMap": self.core.create_namespaced_config_map,
            "ServiceAccount": self.core.create_namespaced_service_account,
            "Role": self.rbac.create_namespaced_role,
            "RoleBinding": self.rbac.create_namespaced_role_binding,
            "Job": self.batch.create_namespaced_job,
            "Lease": self.coord.create_namespaced_lease,
        }
        method = methods[kind]
        extra = {"dry_run": "All"} if dry_run else {}
        try:
            await _call(method, ns, body, **extra)
        except ApiException as exc:
            if exc.status in REFUSALS:
                raise Refused(exc.status, server_message(exc)) from None
            if exc.status != 409:
                raise
        else:
            return True
        owner = controller_uid(obj)
        if owner is not None:
            name = obj["metadata"]["name"]
            try:
                existing = await self.read(kind, ns, name)
            except NotFound:  # deleted in between: the next attempt creates it
                return False
            if controller_uid(existing) != owner:
                raise Refused(409, (
                    f"{kind} {ns}/{name} exists and is not owned by this benchmark (its "
                    f"controlling owner's uid is {controller_uid(existing)}, not {owner}): "
                    "delete it, or give the benchmark another name"
                ))
        return False

    async def read(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """One of a run's objects (``PRUNED_KINDS``), to compare its owner."""
        methods: dict[str, Callable[..., Any]] = {
            "ConfigMap": self.core.read_namespaced_config_map,
            "ServiceAccount": self.core.read_namespaced_service_account,
            "Role": self.rbac.read_namespaced_role,
            "RoleBinding": self.rbac.read_namespaced_role_binding,
            "Job": self.batch.read_namespaced_job,
        }
        return _dict(self.api, await _call(methods[kind], name, namespace))

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        """Deletes a pruned run's object (gone already is fine); a Job takes its pods along."""
        methods: dict[str, Callable[..., Any]] = {
            "ConfigMap": self.core.delete_namespaced_config_map,
            "ServiceAccount": self.core.delete_namespaced_service_account,
            "Role": self.rbac.delete_namespaced_role,
            "RoleBinding": self.rbac.delete_namespaced_role_binding,
            "Job": self.batch.delete_namespaced_job,
        }
        body = k8s.V1DeleteOptions(propagation_policy="Background")
        try:
            await _call(methods[kind], name, namespace, body=body)
        except NotFound:
            return

    @uses("", "configmaps", "get")
    async def get_configmap(self, namespace: str, name: str) -> dict[str, Any]:
        """A results ConfigMap (the runner's digest and summary CSV)."""
        return _dict(self.api, await _call(self.core.read_namespaced_config_map, name, namespace))

    @uses("", "configmaps", "patch")
    async def drop_label(self, namespace: str, name: str, label: str) -> None:
        """Removes a label from a ConfigMap (gone already is fine)."""
        try:
            await _call(self.core.patch_namespaced_config_map, name, namespace,
                        {"metadata": {"labels": {label: None}}})
        except NotFound:
            return

    @uses("", "configmaps", "patch")
    async def add_label(self, namespace: str, name: str, label: str, value: str) -> None:
        """Sets a label on a ConfigMap (gone already is fine)."""
        try:
            await _call(self.core.patch_namespaced_config_map, name, namespace,
                        {"metadata": {"labels": {label: value}}})
        except NotFound:
            return

    @uses("batch", "jobs", "get")
    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        """A runner Job."""
        return _dict(self.api, await _call(self.batch.read_namespaced_job, name, namespace))

    @uses("", "events", "list")
    async def list_events(self, namespace: str, uid: str, reason: str) -> list[dict[str, Any]]:
        """The Events with ``reason`` about the object ``uid`` (a Job's ``FailedCreate``: the
        Job controller says so only in an Event, not in the Job's status)."""
        res = await _call(
            self.core.list_namespaced_event, namespace,
            field_selector=f"involvedObject.uid={uid},reason={reason}",
        )
        return [_dict(self.api, e) for e in res.items]

    @uses("", "events", "create")
    async def create_event(self, event: Mapping[str, Any]) -> None:
        """Posts a core/v1 Event (:func:`llmbench.operator.write.event_object`)."""
        await _call(self.core.create_namespaced_event, event["metadata"]["namespace"],
                    dict(event))

    # -- the per-target Lease -----------------------------------------------------------

    @uses("coordination.k8s.io", "leases", "get")
    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        """The Lease that serialises benchmarks of one endpoint."""
        return _dict(self.api, await _call(self.coord.read_namespaced_lease, name, namespace))

    @uses("coordination.k8s.io", "leases", "patch")
    async def patch_lease(
        self, namespace: str, name: str, resource_version: str, spec: Mapping[str, Any]
    ) -> bool:
        """Merges ``spec`` into the Lease if it is still at ``resource_version`` (what the
        caller decided from); False when it changed or is gone in between."""
        patch = {"metadata": {"resourceVersion": resource_version}, "spec": dict(spec)}
        try:
            await _call(self.coord.patch_namespaced_lease, name, namespace, patch)
        except NotFound:
            return False
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def renew_lease(self, namespace: str, name: str, holder: str, at: str) -> bool:
        """Sets the Lease's ``renewTime`` to ``at`` if ``holder`` holds it; whether it did."""
        try:
            lease = await self.get_lease(namespace, name)
        except NotFound:
            return False
        if (lease.get("spec") or {}).get("holderIdentity") != holder:
            return False
        version = lease["metadata"]["resourceVersion"]
        return await self.patch_lease(namespace, name, version, {"renewTime": at})

    @uses("coordination.k8s.io", "leases", "delete")
    async def delete_lease(self, namespace: str, name: str, holder: str) -> None:
        """Releases the Lease if ``holder`` holds it (the delete is conditional on its uid, so
        a Lease another benchmark took in between is left alone)."""
        try:
            lease = await self.get_lease(namespace, name)
        except NotFound:
            return
        if (lease.get("spec") or {}).get("holderIdentity") != holder:
            return
        uid = lease["metadata"]["uid"]
        try:
            await _call(
                self.coord.delete_namespaced_lease, name, namespace,
                body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid)),
            )
        except (NotFound, ApiException):
            return

