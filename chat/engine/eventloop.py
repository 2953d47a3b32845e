"""The event loop Parley's processes run on (the server's, config.serve; a worker's): uvloop's,
where it is installed (it is, from pyproject.toml, everywhere but Windows), else asyncio's own.

Every process spends much of its time in the event loop's own machinery: each database call
of a socket or a turn is a trip to a thread and back, each event a channel-layer round trip.
In a profile of 30 concurrent flows (bench/load.py) asyncio's own code was ~16% of the CPU
of both web processes and workers; uvloop does the same work in C. Measured on a 2-core
machine, six rounds of 30 flows each way, alternating: answer -> completed reply p50 1.17 s
-> 0.96 s, p95 1.74 s -> 1.48 s.
"""

import asyncio

try:
    import uvloop
except ImportError:  # pragma: no cover - not on Windows
    uvloop = None


def new_event_loop() -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
