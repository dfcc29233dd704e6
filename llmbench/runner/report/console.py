"""What a person sees: the live progress line and GenAI-Perf's results table.

Rendering uses ``rich`` (tables and progress bars are solved problems). The progress display
polls plain counters a few times a second instead of being called per request, so it costs
the measuring loop nothing that grows with load.
"""

from __future__ import annotations

import asyncio
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from llmbench.api.results import PointResult
from llmbench.runner.labels import DISTRIBUTIONS, METRIC_LABELS
from llmbench.runner.load.result import Progress as Counters

_TABLE_STATS = ("avg", "min", "max", "p99", "p90", "p75")
#: Single-valued rows of the console table, in GenAI-Perf's console order.
_TABLE_SINGLES = ("output_token_throughput", "request_throughput", "goodput", "request_count")


def stderr_console() -> Console:
    """Progress and tables go to stderr so stdout stays clean for ``--format json`` users.

    Off a terminal (pod logs, CI) rich would wrap tables at 80 columns; logs can be wider.
    """
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def results_table(summary: PointResult, title: str = "llmbench | LLM Metrics") -> Table:
    """GenAI-Perf's console table, plus error and goodput rows when there are any."""
    table = Table(title=title)
    table.add_column("Statistic", justify="right", style="cyan")
    for s in _TABLE_STATS:
        table.add_column(s, justify="right")
    for key in DISTRIBUTIONS:
        stat = summary.stat(key)
        if stat is not None:
            cells = (f"{getattr(stat, s):,.2f}" for s in _TABLE_STATS)
            table.add_row(METRIC_LABELS[key].genai_perf, *cells)
    for key in _TABLE_SINGLES:
        value = summary.single(key)
        if value is not None:
            blank = ["N/A"] * (len(_TABLE_STATS) - 1)
            table.add_row(METRIC_LABELS[key].genai_perf, f"{value:,.2f}", *blank)
    return table


def validity_lines(summary: PointResult) -> list[str]:
    """The point's validity signals, coloured by severity: what ``profile`` prints after its
    table and ``analyze`` after each point, so no sweep hides a queueing or foreign-traffic
    warning in its JSON."""
    tele = summary.telemetry
    out: list[str] = []
    for signal in tele.validity if tele is not None else []:
        colour = "red" if signal.severity == "error" else "yellow"
        out.append(f"[{colour}]validity: {signal.message}[/{colour}]")
    return out


def notes(summary: PointResult) -> list[str]:
    """One-line facts below the table: errors, token provenance, open-loop dispatch lag,
    connects on the measured path."""
    out = []
    errors = summary.errors
    if errors.total:
        kinds = ", ".join(f"{k}: {v.count}" for k, v in errors.by_type.items())
        out.append(f"[red]errors: {errors.total} ({kinds})[/red]")
    tc = summary.token_counts
    if tc.output_tokens_mismatch:
        out.append(
            f"[yellow]client tokenizer disagreed with server usage on "
            f"{tc.output_tokens_mismatch} responses (server counts used)[/yellow]"
        )
    disp = summary.dispatch
    if disp is not None:
        lag = disp.lag_ms
        settings = summary.input_config or {}
        achieved = disp.achieved_request_rate
        shown = f"{achieved:.2f}" if achieved is not None else "N/A"
        if settings.get("mode") == "fixed_schedule":
            rows = settings.get("fixed_schedule_requests")
            sent = f"{rows} trace rows" if rows is not None else "the trace's rows"
            what = f"fixed schedule: {sent} at their timestamps, achieved {shown} /s"
        else:
            what = f"request rate: target {settings.get('request_rate')} /s, achieved {shown} /s"
        out.append(
            f"{what}; dispatch lag p99 {lag.p99:.2f} ms, max {lag.max:.2f} ms"
        )
    conn = summary.connects
    if conn is not None:
        out.append(
            f"{conn.requests} requests had to open a connection first (the server closed "
            f"keep-alive, or none was idle): connect avg {conn.ms.avg:.2f} ms, max "
            f"{conn.ms.max:.2f} ms, not counted in TTFT or latency"
        )
    settings = summary.input_config or {}
    if settings.get("mode") == "session_concurrency":
        out.append(
            f"sessions: {settings.get('num_sessions')} ({settings.get('request_count')} turns), "
            f"{settings.get('concurrency')} in flight, turns mean "
            f"{settings.get('session_turns_mean')}, delay mean "
            f"{settings.get('session_turn_delay_mean_ms', 0):g} ms after each answer"
        )
    ramp = summary.ramp
    if ramp is not None:
        started = (
            f"the last started at {ramp.last_slot_s:.3f} s, the latest {ramp.max_lag_ms:.1f} ms "
            "behind its plan"
            if ramp.last_slot_s is not None and ramp.max_lag_ms is not None
            else "no slot sent"
        )
        step = f" (+1 every {ramp.step_s:.3f} s)" if ramp.slots > 1 else ""
        out.append(
            f"ramp: 1 -> {ramp.slots} slots over {ramp.seconds:g} s{step}; "
            f"{ramp.started_slots} started, {started}; the "
            f"{summary.window.warmup_requests} warm-up requests include the ramp's"
        )
    st = summary.stability
    if st is not None:
        spreads = ", ".join(
            f"{name} spread {v:.1f}%"
            for name, v in (("throughput", st.throughput_spread_pct),
                            ("latency", st.latency_spread_pct))
            if v is not None
        )
        verdict = "stable" if st.stable else "[yellow]not stable[/yellow]"
        out.append(
            f"stability: {verdict} after {len(st.windows)} windows of "
            f"{st.measurement_interval_ms:g} ms (within {st.stability_percentage:g}%"
            f"{'; ' + spreads if spreads else ''}); statistics from the last "
            f"{st.reported_windows}"
        )
    client = summary.client
    for warning in client.warnings if client is not None else []:
        out.append(f"[yellow]{warning}[/yellow]")
    if client is not None and client.retry_after_waits:
        out.append(
            f"[yellow]the target asked to wait (Retry-After) {client.retry_after_waits} times: "
            f"slots held back {client.retry_after_wait_s or 0:.1f} s in total[/yellow]"
        )
    tele = summary.telemetry
    if tele is not None:
        for warning in tele.warnings:
            out.append(f"[yellow]{warning}[/yellow]")
        out += validity_lines(summary)
        for server in tele.server.values():
            ttft, itl = server.ttft_mean_ms, server.itl_mean_ms
            if ttft is not None and itl is not None:
                out.append(
                    f"server-side ({server.engine}): TTFT mean {ttft:.2f} ms, "
                    f"ITL mean {itl:.2f} ms"
                )
    if summary.interrupted:
        cut = errors.by_type.get("interrupted")
        flight = f"; {cut.count} requests in flight recorded as interrupted" if cut else ""
        out.append(
            f"[yellow]interrupted: results cover the requests completed so far{flight}[/yellow]"
        )
    if summary.stop_reason:
        out.append(f"[red]ended early: {summary.stop_reason}[/red]")
    return out


async def show_progress(
    counters: Counters, total: int | None, description: str, console: Console
) -> None:
    """Polls ``counters`` until cancelled.

    On a terminal it draws a live bar; otherwise (a runner pod's log, CI) it prints one
    line every 10 s, so ``kubectl logs`` shows a long point is alive without flooding it.
    """
    if not sys.stderr.isatty():
        started = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(10)
            of = f"/{total}" if total else ""
            elapsed = asyncio.get_running_loop().time() - started
            console.print(
                f"{description}: {counters.done}{of} requests done, {counters.errors} errors, "
                f"{elapsed:.0f} s"
            )
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("errors {task.fields[errors]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total, errors=0)
        while True:
            bar.update(task, completed=counters.done, errors=counters.errors)
            await asyncio.sleep(0.25)
