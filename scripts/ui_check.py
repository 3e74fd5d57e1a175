"""Time the UI as a person uses it: Debian's chromium, driven by Playwright, against a running
``facet ui`` (or ``facet serve``'s /ui).

Search: click Search N times on a collection and print click-to-results times (the first
click is the cold one). Cluster: upload a texts file (e.g. GoalEx data.json) and its labels,
click Cluster, sample the progress bar while it runs, and print the wall time and the summary
line beside the map (k, silhouette, V-measure against the labels); optional screenshots.

    facet demo && facet ui --port 7860 &
    python scripts/ui_check.py --url http://127.0.0.1:7860/ search --collection demo-banking77
    python scripts/ui_check.py --url http://127.0.0.1:7860/ cluster \\
        --texts ../shared/data/goalex_clustering/agnews/data.json \\
        --labels ../shared/data/goalex_clustering/agnews/labels.json --limit 2000 --k 4 \\
        --instruction "What is the topic of this news article?" --embedder minilm \\
        --screenshot docs/ui/cluster-agnews.png
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import time
from typing import Any

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def set_picker(page: Any, selector: str, value: str) -> None:
    box = page.locator(f"{selector} input")
    box.click()
    box.fill(value)
    box.press("Enter")
    page.locator("body").click(position={"x": 5, "y": 5})


def time_search(page: Any, args: argparse.Namespace) -> None:
    set_picker(page, "#search-collection", args.collection)
    page.fill("#search-query textarea", args.query)
    page.fill("#search-instruction textarea", args.instruction)
    times = []
    for i in range(args.rounds):
        k = 10 - i % 2  # alternate k so each answer differs from the one before
        page.fill("#search-k input[type=number]", str(k))
        page.locator("#search-k input[type=number]").press("Enter")
        started = time.perf_counter()
        page.click("#search-button")
        # Results are grouped by document by default ("10 documents (12 matching chunks) from"):
        # the wait for "10 results from" timed out against every UI since 2026-11-30.
        page.locator("#search-summary").get_by_text(re.compile(rf"\b{k} (documents \(|results from)")).wait_for()
        times.append((time.perf_counter() - started) * 1000)
    first = page.inner_text("#search-results tbody tr >> nth=0").replace("\t", " | ")
    print(f"search on {args.collection!r}: query {args.query!r}, instruction {args.instruction!r}")
    print(f"top result: {first}")
    print(f"server: {page.inner_text('#search-summary').strip()}")
    print("click -> results (ms): " + ", ".join(f"{t:.0f}" for t in times))
    warm = times[1:]
    if warm:
        print(f"warm (rounds 2-{len(times)}): median {statistics.median(warm):.0f} ms, "
              f"min {min(warm):.0f}, max {max(warm):.0f}")
    if args.screenshot:
        page.screenshot(path=args.screenshot, full_page=True)


def time_cluster(page: Any, args: argparse.Namespace) -> None:
    page.get_by_role("tab", name="Cluster").click()
    page.get_by_label("pasted or uploaded texts").check()
    page.locator("#cluster-texts textarea").wait_for()
    page.set_input_files("#cluster-upload input[type=file]", args.texts)
    if args.labels:
        page.set_input_files("#cluster-labels input[type=file]", args.labels)
    stem = args.texts.split("/")[-1].rsplit(".", 1)[0]  # Gradio shows stem and suffix apart
    page.wait_for_function("([sel, stem]) => (document.querySelector(sel) || {innerText: ''})"
                           ".innerText.includes(stem)", arg=["#cluster-upload", stem])
    page.fill("#cluster-limit input", str(args.limit))
    page.fill("#cluster-k input", str(args.k))
    page.fill("#cluster-instruction textarea", args.instruction)
    set_picker(page, "#cluster-embedder", args.embedder)
    started = time.perf_counter()
    page.click("#cluster-button")
    seen: list[str] = []
    shot_taken = False
    while not page.locator("#cluster-summary .facet-cluster-summary").count():
        tracker = page.locator("#cluster-summary [data-testid=status-tracker]")
        text = " ".join(tracker.inner_text().split()) if tracker.count() else ""
        stage = re.sub(r"^[\d.]+s\s*", "", text)  # the tracker starts with its own clock
        if stage and (not seen or seen[-1] != stage):
            seen.append(stage)
            print(f"  {time.perf_counter() - started:6.1f} s  progress: {stage}", flush=True)
            done = re.search(r"([\d.]+)%", stage)
            if args.progress_screenshot and not shot_taken and done and \
                    float(done.group(1)) >= 30:
                page.screenshot(path=args.progress_screenshot, full_page=True)
                shot_taken = True
        time.sleep(0.5)
        if time.perf_counter() - started > args.timeout:
            sys.exit(f"no result after {args.timeout} s")
    wall = time.perf_counter() - started
    page.locator("#cluster-map .js-plotly-plot").wait_for()
    summary = " ".join(page.inner_text("#cluster-summary .facet-cluster-summary").split())
    print(f"click -> map: {wall:.1f} s")
    print(f"beside the map: {summary}")
    if args.screenshot:
        page.screenshot(path=args.screenshot, full_page=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:7860/")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--screenshot", help="PNG of the page at the end")
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("search")
    s.add_argument("--collection", default="demo-banking77")
    s.add_argument("--query", default="my card payment was declined at the shop")
    s.add_argument("--instruction", default="Find messages with the same customer intent")
    s.add_argument("--rounds", type=int, default=6)
    c = sub.add_parser("cluster")
    c.add_argument("--texts", required=True)
    c.add_argument("--labels")
    c.add_argument("--limit", type=int, default=2000)
    c.add_argument("--k", type=int, default=4)
    c.add_argument("--instruction", default="What is the topic of this news article?")
    c.add_argument("--embedder", default="minilm")
    c.add_argument("--timeout", type=float, default=3600)
    c.add_argument("--progress-screenshot", help="PNG taken while the progress bar runs")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.set_default_timeout(120_000)
        page.goto(args.url)
        page.wait_for_function(
            "(document.querySelector('#search-collection input') || {}).value !== undefined")
        if args.what == "search":
            time_search(page, args)
        else:
            time_cluster(page, args)
        browser.close()


if __name__ == "__main__":
    main()
