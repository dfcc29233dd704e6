"""The e2e's RBAC check reads the operator's log for refusals, and only for refusals."""

from __future__ import annotations

from tests.e2e.release import forbidden_lines


def test_a_refusal_in_the_log_is_found_and_digits_that_merely_contain_403_are_not() -> None:
    refused = [
        "kubernetes.client.exceptions.ApiException: (403)",
        "Reason: Forbidden",
        'HTTP response body: {"kind":"Status","code":403}',
        "kopf: APIForbiddenError: ('leases is forbidden', {'code': 403})",
        "kopf._cogs.clients.errors.APIForbiddenError",
        "request failed: status=403",
        'leases.coordination.k8s.io "x" is forbidden: User cannot get',
    ]
    harmless = [
        "benchmark ns/b: uid 5e2f4031-403a-4c1e-9d03-a403b2c1d0e4 Running",
        "patched status at resourceVersion 140339",
        "run 1: point 2/3 done in 0.403 s",
        "Lease llmbench-target-9f403e1c2b7a4403 renewed",
    ]
    assert forbidden_lines(refused + harmless) == refused
