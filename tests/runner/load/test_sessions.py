"""The plan of a multi-turn session run: turns per session and the delays between them."""

from __future__ import annotations

import numpy as np
import pytest

from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.sessions import session_plan


def test_session_plan_is_seeded_and_bounded_as_genai_perf_draws_it() -> None:
    cfg = LoadConfig(
        mode="session_concurrency", num_sessions=400, session_turns_mean=3,
        session_turns_stddev=2, session_turn_delay_mean_ms=20, session_turn_delay_stddev_ms=30,
        seed=9,
    )
    plan = session_plan(cfg)
    assert plan == session_plan(cfg)  # the seed makes it repeatable
    assert len(plan.turns) == 400 and min(plan.turns) == 1  # at least one turn each
    assert np.mean(plan.turns) == pytest.approx(3.2, abs=0.4)  # clamped at 1, so a bit more
    assert [len(d) for d in plan.delays_ms] == [t - 1 for t in plan.turns]
    delays = [d for ds in plan.delays_ms for d in ds]
    assert min(delays) == 0 and all(isinstance(d, int) for d in delays)
    assert plan.total == sum(plan.turns)
    assert plan.first()[:3] == [0, plan.turns[0], plan.turns[0] + plan.turns[1]]
    fixed = session_plan(LoadConfig(num_sessions=2, session_turns_mean=3,
                                    session_turn_delay_mean_ms=15))
    assert fixed.turns == (3, 3) and fixed.delays_ms == ((15, 15), (15, 15))
