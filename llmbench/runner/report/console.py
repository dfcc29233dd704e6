"""What a person sees: the live progress line and GenAI-Perf's results table.

Rendering uses ``rich`` (tables and progress bars are solved problems). The progress display
polls plain counters a few times a second instead of being called per request, so it costs
the measuring loop nothing that grows with load.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from llmbench.runner.load.engine import Progress as Counters
from llmbench.runner.point.artifacts import CSV_ROWS

_TABLE_STATS = ("avg", "min", "max", "p99", "p90", "p75")


def stderr_console() -> Console:
    """Progress and tables go to stderr so stdout stays clean for ``--format json`` users.

    Off a terminal (pod logs, CI) rich would wrap tables at 80 columns; logs can be wider.
    """
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def results_table(summary: dict[str, Any], title: str = "llmbench | LLM Metrics") -> Table:
    """GenAI-Perf's console table, plus error and goodput rows when there are any."""
    table = Table(title=title)
    table.add_column("Statistic", justify="right", style="cyan")
    for s in _TABLE_STATS:
        table.add_column(s, justify="right")
    for key, label in CSV_ROWS:
        entry = summary.get(key)
        if entry:
            table.add_row(label, *(f"{entry[s]:,.2f}" for s in _TABLE_STATS))
    singles = [
        ("output_token_throughput", "Output Token Throughput (tokens/sec)"),
        ("request_throughput", "Request Throughput (per sec)"),
        ("goodput", "Request Goodput (per sec)"),
        ("request_count", "Request Count (count)"),
    ]
    for key, label in singles:
        entry = summary.get(key)
        if entry and entry.get("avg") is not None:
            table.add_row(label, f"{entry['avg']:,.2f}", *(["N/A"] * (len(_TABLE_STATS) - 1)))
    return table


def notes(summary: dict[str, Any]) -> list[str]:
    """One-line facts below the table: errors, token provenance, open-loop dispatch lag."""
    out = []
    errors = summary.get("errors", {})
    if errors.get("total"):
        kinds = ", ".join(f"{k}: {v['count']}" for k, v in errors["by_type"].items())
        out.append(f"[red]errors: {errors['total']} ({kinds})[/red]")
    tc = summary.get("token_counts", {})
    if tc.get("output_tokens_mismatch"):
        out.append(
            f"[yellow]client tokenizer disagreed with server usage on "
            f"{tc['output_tokens_mismatch']} responses (server counts used)[/yellow]"
        )
    disp = summary.get("dispatch")
    if disp and disp.get("lag_ms"):
        lag = disp["lag_ms"]
        target = summary.get("input_config", {}).get("request_rate")
        achieved = disp.get("achieved_request_rate")
        shown = f"{achieved:.2f}" if achieved is not None else "N/A"
        out.append(
            f"request rate: target {target} /s, achieved {shown} /s; "
            f"dispatch lag p99 {lag['p99']:.2f} ms, max {lag['max']:.2f} ms"
        )
    for warning in (summary.get("client") or {}).get("warnings", []):
        out.append(f"[yellow]{warning}[/yellow]")
    tele = summary.get("telemetry") or {}
    for warning in tele.get("warnings", []):
        out.append(f"[yellow]{warning}[/yellow]")
    for signal in tele.get("validity", []):
        colour = "red" if signal.get("severity") == "error" else "yellow"
        out.append(f"[{colour}]validity: {signal['message']}[/{colour}]")
    for server in (tele.get("server") or {}).values():
        ttft, itl = server.get("ttft_mean_ms"), server.get("itl_mean_ms")
        if ttft is not None and itl is not None:
            out.append(
                f"server-side ({server.get('engine')}): TTFT mean {ttft:.2f} ms, "
                f"ITL mean {itl:.2f} ms"
            )
    if summary.get("interrupted"):
        out.append("[yellow]interrupted: results cover the requests completed so far[/yellow]")
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
