"""The Pareto view's pure functions against hand-made points whose frontier is known."""

from __future__ import annotations

from llmbench.api.results import PointMetrics, SweepPoint
from llmbench.runner.sweep.pareto import PER_USER, frontier, pareto_summary


def test_frontier_of_a_hand_made_set() -> None:
    # (per-user tok/s, tok/s per GPU); both larger-is-better
    points = [
        (100.0, 50.0),   # 0: fastest per user: on it
        (80.0, 120.0),   # 1: on it
        (80.0, 100.0),   # 2: same x as 1, lower y: dominated by 1
        (60.0, 110.0),   # 3: dominated by 1 (lower on both)
        (40.0, 200.0),   # 4: most throughput: on it
        (40.0, 200.0),   # 5: equal to 4: equal points dominate neither
        (20.0, 150.0),   # 6: dominated by 4
        (90.0, 50.0),    # 7: same y as 0, lower x: dominated by 0
    ]
    assert frontier(points) == [True, True, False, False, True, True, False, False]


def test_frontier_edges() -> None:
    assert frontier([]) == []
    assert frontier([(1.0, 1.0)]) == [True]
    # a strict trade-off: every point on it
    assert frontier([(3.0, 1.0), (2.0, 2.0), (1.0, 3.0)]) == [True, True, True]
    # one point better on both: only it
    assert frontier([(1.0, 1.0), (2.0, 2.0), (1.5, 0.5)]) == [False, True, False]


def point(name: str, workload: str, ott: float | None, per_user: float | None,
          gpus: int | None, status: str = "ok") -> SweepPoint:
    return SweepPoint(
        name=name, value=1.0, label="1", status=status,  # type: ignore[arg-type]
        reason=None if status == "ok" else "boom", runs=[],
        metrics=PointMetrics(value=1.0, ott=ott), spreads={}, unstable=[],
        cost_per_million_output_tokens=None, joules_per_output_token=None, isl=None,
        achieved_request_rate=None, workload=workload, tokens_per_user=per_user, gpus=gpus,
    )


def test_summary_divides_by_the_kept_gpus() -> None:
    pts = [
        point("a1", "a", ott=400.0, per_user=100.0, gpus=2),  # 200 per GPU
        point("a4", "a", ott=1000.0, per_user=50.0, gpus=2),  # 500 per GPU
        point("b1", "b", ott=150.0, per_user=90.0, gpus=1),   # 150 per GPU: dominated by a1
        point("b4", "b", ott=900.0, per_user=40.0, gpus=4),   # 225: dominated by a4
        point("bx", "b", ott=None, per_user=None, gpus=None, status="failed"),  # left out
    ]
    s = pareto_summary(pts)
    assert s is not None
    assert s.basis == "gpu"
    assert [(p.name, p.tokens_per_second, p.frontier) for p in s.points] == [
        ("a1", 200.0, True), ("a4", 500.0, True), ("b1", 150.0, False), ("b4", 225.0, False),
    ]
    assert s.frontier == ["a1", "a4"]
    assert s.message.startswith("Pareto frontier (output tokens/s per GPU (OTT / the kept GPUs)")
    assert PER_USER in s.message and s.message.endswith(": 2 of 4 points: a1, a4")


def test_summary_without_gpus_everywhere_is_per_run() -> None:
    # one point lacks GPU telemetry: no per-GPU figure is comparable, so the OTT is per run
    pts = [
        point("a1", "a", ott=400.0, per_user=100.0, gpus=2),
        point("b1", "b", ott=300.0, per_user=120.0, gpus=None),
    ]
    s = pareto_summary(pts)
    assert s is not None
    assert s.basis == "run"
    assert [(p.tokens_per_second, p.frontier) for p in s.points] == [(400.0, True), (300.0, True)]
    assert "per run (no GPU telemetry on every point" in s.message


def test_summary_needs_a_measured_point() -> None:
    assert pareto_summary([point("x", "a", ott=10.0, per_user=None, gpus=1)]) is None
