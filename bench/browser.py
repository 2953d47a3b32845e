"""Round trip in a browser: click an option -> the agent's follow-up text is on the page.

Chromium (Playwright) against Parley (one daphne process, SQLite, the in-memory channel
layer, the local model server) and against the floor server (bench/floor.py), trials
interleaved in one run. Each trial is timed twice: inside the page, from the click event to
the DOM mutation that puts the follow-up's first word on the page (precise); and as Playwright
sees it, from the click call to its wait for that text returning (the goal's measure, which
adds Playwright's own round trips to both systems).
"""

import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from bench.floor import Floor
from bench.model import FOLLOW_UP, OPTIONS
from bench.servers import parley
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.pages import log_in, new_conversation, send

# Records the click, then the first mutation after which the page shows one more `text`.
WATCH = """(text) => {
  const count = () => document.body.textContent.split(text).length - 1;
  const baseline = count();
  window.__clicked = null; window.__seen = null;
  document.addEventListener("click", () => { window.__clicked ??= performance.now(); },
                            {capture: true, once: true});
  const observer = new MutationObserver(() => {
    if (window.__clicked !== null && count() > baseline) {
      window.__seen = performance.now(); observer.disconnect();
    }
  });
  observer.observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


def timed_click(page, button) -> tuple[float, float]:
    """(milliseconds in the page, milliseconds as Playwright sees it: from the call that
    clicks to the return of the wait for the follow-up's text, the goal's measure)."""
    page.evaluate(WATCH, FOLLOW_UP)
    started = time.perf_counter()
    button.click()
    page.get_by_text(FOLLOW_UP).wait_for()
    seen = (time.perf_counter() - started) * 1000
    # Polled from here (the page's CSP allows no eval); the time is the page's own.
    for _ in range(3000):
        if page.evaluate("() => window.__seen") is not None:
            return page.evaluate("() => window.__seen - window.__clicked"), seen
        page.wait_for_timeout(5)
    raise TimeoutError("the follow-up did not appear")


def parley_trial(page) -> tuple[float, float]:
    page.goto("/")
    new_conversation(page)
    send(page, "hello")
    option = page.get_by_role("button", name=OPTIONS[0])
    expect(option).to_be_visible()
    return timed_click(page, option)


def floor_trial(page) -> tuple[float, float]:
    page.goto("/")
    page.wait_for_function("() => window.ws && window.ws.readyState === 1")
    return timed_click(page, page.get_by_role("button", name=OPTIONS[0]))


def summary(ms: list[float]) -> dict:
    ordered = sorted(ms)
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "samples_ms": [round(v, 1) for v in ms],
    }


def run(model_url: str, trials: int = 12) -> dict:
    floor = Floor(Path(tempfile.mkdtemp(prefix="parley-floor-")))
    times: dict[str, list[float]] = {
        "parley": [],
        "floor": [],
        "parley_playwright": [],
        "floor_playwright": [],
    }
    try:
        with parley(model_url) as [server], sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            parley_page = browser.new_context(base_url=server.url, locale="en-US").new_page()
            floor_page = browser.new_context(base_url=floor.url).new_page()
            log_in(parley_page)
            for _ in range(2):  # warm up
                parley_trial(parley_page)
                floor_trial(floor_page)
            for _ in range(trials):
                for name, trial, page in (
                    ("parley", parley_trial, parley_page),
                    ("floor", floor_trial, floor_page),
                ):
                    in_page, seen = trial(page)
                    times[name].append(in_page)
                    times[f"{name}_playwright"].append(seen)
            browser.close()
    finally:
        floor.close()
    result = {name: summary(ms) for name, ms in times.items()}
    for suffix in ("", "_playwright"):
        ratio = result[f"parley{suffix}"]["median_ms"] / result[f"floor{suffix}"]["median_ms"]
        result[f"ratio{suffix}"] = round(ratio, 2)
    return result


if __name__ == "__main__":
    from bench.model import Model

    out = run(Model().url, 10)
    print(
        {k: (v if not isinstance(v, dict) else {**v, "samples_ms": None}) for k, v in out.items()}
    )
