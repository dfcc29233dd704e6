"""The simulated dcgm-exporter's entrypoint (hack/image/dcgm-exporter.Containerfile).

Serves llmbench's :class:`~llmbench.sim.dcgm.DcgmSimulator` like dcgm-exporter serves a node:
``GET /metrics`` on port 9400, one series per GPU and field, the GPUs labelled with the pod
they serve (``--pod``/``--namespace``, as dcgm-exporter's pod mapping does), power and
utilisation at a fixed busy fraction (``--load``) and energy counters that grow with it.

Example (a pod spec's args): ``--gpus 2 --pod vllm-7d9f --namespace llm-demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from llmbench.sim.dcgm import DcgmSimState, DcgmSimulator, serve_dcgm


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The exporter's flags; ``--hostname`` defaults to ``$NODE_NAME`` (downward API)."""
    ap = argparse.ArgumentParser(prog="dcgm-exporter-sim", description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=9400, help="listen port (default 9400)")
    ap.add_argument("--gpus", type=int, default=1, help="simulated GPUs (default 1)")
    ap.add_argument("--pod", default=None, help="pod label of the GPUs (the pod they serve)")
    ap.add_argument("--namespace", default=None, help="namespace label of the GPUs")
    ap.add_argument("--container", default=None, help="container label of the GPUs")
    ap.add_argument("--hostname", default=os.environ.get("NODE_NAME", "llmbench-sim"),
                    help="Hostname label (default $NODE_NAME)")
    ap.add_argument("--load", type=float, default=0.8, help="busy fraction 0..1 (default 0.8)")
    return ap.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    """Serve until killed."""
    state = DcgmSimState(n_gpus=args.gpus, hostname=args.hostname, pod=args.pod,
                         namespace=args.namespace, container=args.container)
    load = min(max(args.load, 0.0), 1.0)
    server = await serve_dcgm(DcgmSimulator(state, load=lambda: load), "0.0.0.0", args.port)
    print(f"dcgm-exporter-sim: {args.gpus} simulated GPU(s) on :{args.port}/metrics", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(parse_args()))
