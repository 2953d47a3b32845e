"""`.venv/bin/python -m bench.ab BASE [PAIRS]`: this checkout against commit BASE, alternately
in one sitting, through the same benchmark code (this checkout's bench/, copied into a
worktree of BASE): the browser round trip, the load section's 30 flows (p95, errors) and CPU
per answered flow. Prints each run and the medians of the pairs, and the ratios now/before.

Needs what `make bench` needs. The worktree (under /tmp) and its virtualenv are made once and
kept for later runs: `git worktree remove` it when done.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("browser", "load")


def worktree(base: str) -> Path:
    """A checkout of `base` with this checkout's bench/ and a virtualenv of its own lock."""
    path = Path("/tmp") / f"parley-ab-{base[:12]}"
    if not path.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), base], cwd=ROOT, check=True
        )
        subprocess.run(["make", "messages"], cwd=path, check=True)
    for tree in (path, ROOT):  # matplotlib, for the plot each run draws
        extras = {**os.environ, "PARLEY_EXTRAS": "dev bench"}
        subprocess.run(["scripts/bootstrap.sh"], cwd=tree, check=True, env=extras)
    shutil.rmtree(path / "bench")
    shutil.copytree(ROOT / "bench", path / "bench")
    return path


def run(tree: Path) -> dict:
    subprocess.run([str(tree / ".venv/bin/python"), "-m", "bench", *SECTIONS], cwd=tree, check=True)
    results = json.loads((tree / "docs/bench/results.json").read_text())
    load = results["load"]["30"]
    return {
        "round_trip_ms": results["browser"]["parley_playwright"]["median_ms"],
        "p95_ms": load["p95_ms"],
        "errors": load["errors"],
        "cpu_ms_per_flow": load["cpu_ms_per_flow"],
    }


def main(base: str, pairs: int) -> None:
    before_tree = worktree(base)
    runs: dict[str, list[dict]] = {"before": [], "now": []}
    for pair in range(pairs):
        for name, tree in (("before", before_tree), ("now", ROOT)):
            figures = run(tree)
            runs[name].append(figures)
            print(f"ab: pair {pair + 1} {name}: {figures}", flush=True)
    medians = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()
    }
    print(json.dumps({"runs": runs, "medians": medians}, indent=2))
    for key in ("round_trip_ms", "p95_ms", "cpu_ms_per_flow"):
        ratio = medians["now"][key] / medians["before"][key]
        print(f"ab: {key}: {medians['before'][key]} → {medians['now'][key]} ({ratio:.2f}×)")
    print(f"ab: errors in every run: {[r['errors'] for rs in runs.values() for r in rs]}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
