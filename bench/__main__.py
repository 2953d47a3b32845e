"""`make bench` (or `.venv/bin/python -m bench [section ...]`): Parley's performance figures.

Sections: browser, server_side, approval, streaming, load, flood, isolation, idle, transcript
(all by default). Writes docs/bench/results.json, docs/bench/results.md (the README's table) and
docs/bench/bench.png. A run of some sections keeps the other sections' figures and the full
run's totals; its machine speed goes into its own sections' figures.
The model is bench/model.py: a local OpenAI-compatible server that answers at once (streaming
at a fast model's pace for the streaming section), driven through the real `openai` SDK.

Needs PostgreSQL and Redis on 127.0.0.1 (it creates and drops its own `parley_perf_*`
database and uses Redis database 13) and Chromium at /usr/bin/chromium.
"""

import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "bench"
SECTIONS = (
    "browser",
    "server_side",
    "approval",
    "streaming",
    "load",
    "flood",
    "isolation",
    "idle",
    "transcript",
)
# bench/idle.py's kinds of connection: in the table, and (shorter) in the plot.
IDLE_KINDS = (
    ("websocket", "websocket (permessage-deflate)"),
    ("websocket_plain", "websocket, uncompressed"),
    ("sse", "event stream (SSE)"),
)
IDLE_LABELS = (
    ("websocket", "websocket\n(deflate)"),
    ("websocket_plain", "websocket\n(uncompressed)"),
    ("sse", "event stream"),
)


def machine_speed() -> float:
    """Milliseconds this machine takes for 3,000,000 additions in a Python loop (best of 3).
    Every figure here is CPU-bound Python, and a virtual machine's speed moves between days
    (by 2.5 times, seen on the same kind of machine): timed before and after a run, it tells which
    runs can be compared in absolute terms."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        total = 0
        for i in range(3_000_000):
            total += i
        best = min(best, time.perf_counter() - began)
    return round(best * 1000, 1)


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from bench import (
        approval,
        browser,
        flood,
        idle,
        isolation,
        load,
        server_side,
        streaming,
        transcript,
    )
    from bench.model import Model

    modules = {
        "browser": browser,
        "server_side": server_side,
        "approval": approval,
        "streaming": streaming,
        "load": load,
        "flood": flood,
        "isolation": isolation,
        "idle": idle,
        "transcript": transcript,
    }
    chosen = argv or list(SECTIONS)
    model = Model()
    paced = Model(pace=streaming.PACE)
    results: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "model": "bench/model.py: a local OpenAI-compatible server answering at once (openai SDK)",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    previous = OUT / "results.json"
    partial = bool(argv) and previous.exists()
    if partial:  # a partial run keeps the other sections' figures
        results = {**json.loads(previous.read_text()), **results}
    speed_before = machine_speed()
    started = time.monotonic()
    for name in chosen:
        began = time.monotonic()
        print(f"bench: {name}…", flush=True)
        # The transcript section streams a reply into its pages' tabs (the others answer at once).
        url = paced.url if name in ("streaming", "transcript") else model.url
        results[name] = modules[name].run(url)
        results[name]["seconds"] = round(time.monotonic() - began, 1)
    total = round(time.monotonic() - started, 1)
    speed = {"start": speed_before, "end": machine_speed()}
    if partial:  # the totals stay the full run's; this run's speed goes with its sections
        for name in chosen:
            results[name]["machine_speed_ms"] = speed
    else:
        results["total_seconds"] = total
        results["machine_speed_ms"] = speed
    previous.write_text(json.dumps(results, indent=2) + "\n")
    table = figures(results)
    (OUT / "results.md").write_text(table + "\n")
    plot(results, OUT / "bench.png")
    print(table)
    print(f"bench: {total} s; results in {OUT.relative_to(ROOT)}/")


def figures(r: dict) -> str:
    """The results table (docs/bench/results.md): each figure, and its goal."""
    rows = ["| measure | result | goal |", "|---|---|---|"]
    if b := r.get("browser"):
        rows.append(
            f"| browser round trip, median (in the page) | Parley {b['parley']['median_ms']} ms, "
            f"floor {b['floor']['median_ms']} ms: **{b['ratio']}×** | – (stricter than the "
            "goal's measure, below) |"
        )
        rows.append(
            "| browser round trip, median (as Playwright sees it) | Parley "
            f"{b['parley_playwright']['median_ms']} ms, floor "
            f"{b['floor_playwright']['median_ms']} ms: **{b['ratio_playwright']}×** | ≤ 2× |"
        )
    if s := r.get("server_side"):
        for layer, label in (("in_memory", "in-memory layer"), ("redis", "Redis + a worker")):
            rows.append(
                f"| answer → first frame of the reply, {label} | p50 **{s[layer]['p50_ms']} ms**, "
                f"p99 {s[layer]['p99_ms']} ms | " + "– |"
            )
        if "first_turn_ms" in s["in_memory"]:  # results from before it was measured lack it
            rows.append(
                "| a process's first turn after it starts (message → the question shown), "
                f"in-memory layer | **{s['in_memory']['first_turn_ms']} ms**; later turns "
                f"{s['in_memory']['later_turns_ms']} ms | – |"
            )
    if s := r.get("approval"):
        rows.append(
            "| an MCP tool call, message → the reply after its result: run at once / with an "
            "approval (message → approval shown, plus Allow → the reply), medians | "
            f"{s['plain_ms']} ms / {s['asked_ms']} + {s['resumed_ms']} = {s['approval_ms']} ms: "
            f"the approval costs **{s['cost_ms']} ms** | – |"
        )
    if s := r.get("streaming"):
        for reply in s["replies"]:
            wire = (
                f"on the wire (permessage-deflate) {reply['wire_bytes']:,} B: "
                f"**{reply['wire_ratio']}×**; "
                if "wire_bytes" in reply  # results from before the wire was counted
                else ""
            )
            rows.append(
                f"| websocket bytes for a {reply['chars']:,}-character reply "
                f"({s['pace_words_per_second']} words/s) | {wire}payload {reply['bytes']:,} B "
                f"in {reply['frames']} frames: {reply['ratio']}× | "
                + ("≤ 2× on the wire |" if reply["chars"] == 50_000 else "– |")
            )
    if s := r.get("load"):
        for n, level in s.items():
            if not n.isdigit():  # the section's time and the machine's speed
                continue
            rows.append(
                f"| {n} concurrent flows, answer → completed reply | p50 {level['p50_ms']} ms, "
                f"p95 **{level['p95_ms']} ms**, errors {level['errors']}, peak DB connections "
                f"{level['peak_db_connections']}, CPU per flow "
                f"{level.get('cpu_ms_per_flow', '–')} ms (all processes) | "
                + ("p95 ≤ 800 ms, no errors |" if n == "30" else "– |")
            )
    if s := r.get("flood"):
        rows.append(
            "| one user's flood (200 messages, 300 event streams) against the limits: another "
            f"user's turn alone / under the flood | {s['alone_s']} s / {s['flooded_s']} s: "
            f"**{s['ratio']}×** | ≤ 2× |"
        )
    if s := r.get("isolation"):
        rows.extend(isolation_rows(s))
    if s := r.get("idle"):
        for kind, label in IDLE_KINDS:
            if kind not in s:
                continue
            k = s[kind]
            rows.append(
                f"| idle {label}: memory each; RSS open → closed; Redis connections open → "
                f"closed | **{k['kb_each']} KB**; {k['rss_kb']['open'] // 1024} → "
                f"{k['rss_kb']['closed'] // 1024} MB; {k['redis_connections']['open']} → "
                f"{k['redis_connections']['closed']} | " + "given back |"
            )
    if s := r.get("transcript"):
        for t, kind in ((s, ""), (s.get("with_tools"), " with 250 tool cards")):
            if not t:
                continue
            first = f"first page {t['first_page_ms']} ms, then " if "first_page_ms" in t else ""
            rows.append(
                f"| {s['messages']:,}-message transcript{kind}: page / websocket catch-up | "
                f"{first}{t['page_ms']} ms / {t['catch_up_ms']} ms | – |"
            )
    if (s := r.get("transcript")) and (lengths := s.get("lengths")):
        for n, t in lengths.items():
            rows.append(
                f"| {int(n):,}-message transcript: page / websocket catch-up from 0; the page in "
                f"Chromium: JS heap, DOM nodes | {t['page_ms']} ms / {t['catch_up_ms']} ms; "
                f"{t['js_heap_mb']} MB, {t['dom_nodes']:,} nodes | – |"
            )
        f = s["flatness"]
        first, *_, last = lengths
        rows.append(
            f"| {int(last):,} messages over {int(first):,}: page / catch-up / JS heap | "
            f"**{f['page']}× / {f['catch_up']}× / {f['js_heap']}×** | ≤ 1.5× |"
        )
    if (s := r.get("transcript")) and (a := s.get("streamed_appends")):
        rows.append(
            f"| streamed text ({a['chars']:,} characters) in Chromium: the page's main-thread time "
            f"per append, median (p90), {s['messages']:,}-message page / new conversation | "
            f"**{a['long']['median_ms']} ms** ({a['long']['p90_ms']} ms) / "
            f"{a['new']['median_ms']} ms ({a['new']['p90_ms']} ms) | – |"
        )
    if s := r.get("machine_speed_ms"):
        rows.append(
            "| machine speed: 3,000,000 additions in a Python loop, best of 3, before / after "
            f"the run | {s['start']} ms / {s['end']} ms | – |"
        )
    return "\n".join(rows)


# bench/isolation.py's attacks: what the attacker does, and what of the victim's is timed.
ISOLATION_ATTACKS = (
    ("webhook_bodies", "its 10 webhooks' receiver answers with a 1.5 GB body", "turn"),
    ("trickling_receiver", "its 10 webhooks' receiver answers a byte a second", "turn"),
    ("websockets", "300 websockets on 3 streaming conversations", "turn"),
    ("search", "12 searches at once, over and over, of 3,000 messages of 19 KB", "page"),
    ("regenerate", "80 Regenerate presses in 30 s", "turn"),
)


def isolation_rows(s: dict) -> list[str]:
    """One row per attack of bench/isolation.py: the victim's time alone / under the attack,
    the process's memory, and what the attacker got."""
    rows = []
    for name, attack, timed in ISOLATION_ATTACKS:
        if not (a := s.get(name)):
            continue
        got = a["attacker"]
        if name == "trickling_receiver":
            late, heard = a["expiry_late_s"], a["victim_delivery_s"]
            extra = (
                f"; the victim's question expired {late['baseline']} s / {late['attacked']} s "
                f"after its {a['deadline_s']} s deadline, their webhook heard of it after "
                f"{heard['baseline']} s / {heard['attacked']} s"
            )
        elif name == "webhook_bodies":
            extra = (
                f"; {got['attempts_answered']} attempts, at most "
                f"{got['body_taken_max_mb']} MB of a body taken"
            )
        elif name == "websockets":
            closed = got["closed"].get("4429", 0)
            extra = f"; {got['kept_open']} kept open, {closed} closed (4429)"
        elif name == "search":
            extra = ", ".join(f"{n} × {code}" for code, n in sorted(got["searches"].items()))
            extra = f"; searches {extra}"
        else:
            presses = got["regenerations"]
            extra = ", ".join(f"{n} × {code}" for code, n in sorted(presses.items()))
            extra = f"; presses {extra}"
        rows.append(
            f"| one user's attack ({attack}): another user's {timed} alone / under it; the "
            f"process's memory before → peak | {a['baseline_s']} s / {a['attacked_s']} s: "
            f"**{a['ratio']}×**; {a['rss_baseline_mb']:.0f} → {a['rss_peak_mb']:.0f} MB "
            f"(**+{a['rss_delta_mb']:.0f} MB**){extra} | ≤ 2×, ≤ +64 MB |"
        )
    return rows


def plot(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    speed = r.get("machine_speed_ms")
    pace = f"; 3M additions in {speed['start']}–{speed['end']} ms" if speed else ""
    fig.suptitle(f"Parley benchmark ({r['machine']}{pace})")

    def bars(ax, labels, values, title, unit, goal=None):
        ax.bar(labels, values, color=["#4c72b0", "#dd8452", "#55a868", "#c44e52"][: len(values)])
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(unit)
        for i, v in enumerate(values):
            ax.annotate(f"{v:g}", (i, v), ha="center", va="bottom", fontsize=8)
        if goal is not None:
            ax.axhline(goal, color="grey", linestyle="--", linewidth=1)
        ax.tick_params(axis="x", labelsize=8)

    if b := r.get("browser"):
        bars(
            axes[0][0],
            ["floor\n(page)", "Parley\n(page)", "floor\n(Playwright)", "Parley\n(Playwright)"],
            [
                b["floor"]["median_ms"],
                b["parley"]["median_ms"],
                b["floor_playwright"]["median_ms"],
                b["parley_playwright"]["median_ms"],
            ],
            "Click an option → follow-up visible (median)",
            "ms",
        )
    if s := r.get("server_side"):
        bars(
            axes[0][1],
            ["in-memory p50", "in-memory p99", "Redis p50", "Redis p99"],
            [
                s["in_memory"]["p50_ms"],
                s["in_memory"]["p99_ms"],
                s["redis"]["p50_ms"],
                s["redis"]["p99_ms"],
            ],
            "Answer POST → first frame of the reply",
            "ms",
        )
    if s := r.get("streaming"):
        ax = axes[0][2]
        replies = s["replies"]
        at = range(len(replies))
        for offset, key, label, color in (
            (-0.2, "ratio", "payload", "#4c72b0"),
            (0.2, "wire_ratio", "on the wire (deflate)", "#dd8452"),
        ):
            values = [x.get(key, 0) for x in replies]
            ax.bar([i + offset for i in at], values, width=0.4, label=label, color=color)
            for i, v in zip(at, values, strict=True):
                ax.annotate(f"{v:g}", (i + offset, v), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(at), [f"{x['chars'] // 1000}k chars" for x in replies])
        ax.axhline(2, color="grey", linestyle="--", linewidth=1)
        ax.set_title("Websocket bytes / reply length", fontsize=10)
        ax.set_ylabel("×")
        ax.tick_params(axis="x", labelsize=8)
        ax.legend(fontsize=8)
    if s := r.get("load"):
        ax = axes[1][0]
        levels = [v for k, v in s.items() if k.isdigit()]  # not the machine-speed entry
        n = [v["flows"] for v in levels]
        ax.plot(n, [v["p50_ms"] for v in levels], marker="o", label="p50")
        ax.plot(n, [v["p95_ms"] for v in levels], marker="o", label="p95")
        ax.axhline(1000, color="grey", linestyle="--", linewidth=1)
        ax.set_title("Concurrent flows: answer → completed reply", fontsize=10)
        ax.set_xlabel("flows (2 web + 2 workers, PostgreSQL, Redis)")
        ax.set_ylabel("ms")
        ax.legend()
    if s := r.get("idle"):
        shown = [(kind, label) for kind, label in IDLE_LABELS if kind in s]
        bars(
            axes[1][1],
            [label for _, label in shown],
            [s[kind]["kb_each"] for kind, _ in shown],
            "Memory per idle connection",
            "KB",
        )
    if (s := r.get("transcript")) and (lengths := s.get("lengths")):
        ax = axes[1][2]
        n = [int(k) for k in lengths]
        ax.plot(n, [t["page_ms"] for t in lengths.values()], marker="o", label="page (GET)")
        ax.plot(n, [t["catch_up_ms"] for t in lengths.values()], marker="o", label="catch-up")
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.set_title("Time against transcript length", fontsize=10)
        ax.set_xlabel("messages in the conversation")
        ax.set_ylabel("ms")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main(sys.argv[1:])
