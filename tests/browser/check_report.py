"""Opens a `ptrain report` page in headless Debian Chromium (Python playwright
from the project's .venv, never a downloaded browser) and checks it: every
metric family has a chart holding exactly the points its runs' metrics.jsonl
files hold (eval/<m> in the chart of <m>; metrics constant over the runs in the
summary table instead), each chart drew its first series on the canvas, its
y-axis labels are distinct and say their ticks' values, the loss chart zooms on
a drag, switches to a log scale and hides a series from its legend, and the page
asked for nothing over the network. Saves a screenshot of the whole page and
one of what opening it shows first (<name>_top.png).

    python check_report.py REPORT.html SCREENSHOT.png RUN_DIR...
"""
import json
import math
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
FIRST_SERIES_RGB = (31, 119, 180)  # #1f77b4, the page's first colour

# Per chart: what the page recorded, what dygraphs holds and the pixels near
# the first series' colour on its canvases (anti-aliasing allowed).
CHART_STATE_JS = """(family) => {
  const chart = window.ptrainReport.charts.find((c) => c.family === family);
  const g = chart.plot;
  const box = document.querySelector('.chart[data-family="' + family + '"]');
  let drawn = 0;
  for (let row = 0; row < g.numRows(); row += 1) {
    for (let column = 1; column < g.numColumns(); column += 1) {
      const value = g.getValue(row, column);
      if (value !== null && value !== undefined && !Number.isNaN(value)) drawn += 1;
    }
  }
  let ink = 0;
  let canvasWidth = 0;
  for (const canvas of box.querySelectorAll('canvas')) {
    canvasWidth = Math.max(canvasWidth, canvas.width);
    if (canvas.width === 0 || canvas.height === 0) continue;
    const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (let i = 0; i < pixels.length; i += 4) {
      if (Math.abs(pixels[i] - %d) < 40 && Math.abs(pixels[i + 1] - %d) < 40 &&
          Math.abs(pixels[i + 2] - %d) < 40 && pixels[i + 3] > 128) ink += 1;
    }
  }
  return { family: chart.family, series: chart.series, points: chart.points, drawn,
           domPoints: Number(box.getAttribute('data-points')), domSeries: Number(box.getAttribute('data-series')),
           canvasWidth, ink, yTicks: chart.yTicks.slice(), ySplits: chart.ySplits.slice(),
           logscale: Boolean(g.getOption('logscale')), visibility: g.visibility().slice(),
           xRange: g.xAxisRange(), zoomed: g.isZoomed('x') };
}""" % FIRST_SERIES_RGB


def read_runs(run_dirs):
    runs = []
    for run_dir in run_dirs:
        lines = (Path(run_dir) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        runs.append([json.loads(line) for line in lines if line.strip()])
    return runs


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def constant_metrics(runs):
    """name -> value of the metrics with one finite value at every step that
    logs them, in every run, over at least two steps."""
    seen = {}
    for records in runs:
        for record in records:
            for name, value in record.items():
                if name == "step" or not is_number(value) or not math.isfinite(value):
                    continue
                metric = seen.setdefault(name, {"value": value, "count": 0, "differs": False})
                metric["differs"] = metric["differs"] or value != metric["value"]
                metric["count"] += 1
    return {name: m["value"] for name, m in seen.items() if not m["differs"] and m["count"] >= 2}


def expected_charts(runs, constants):
    """family -> {points, series}: counted from the metrics files, independently of the page."""
    families = {}
    for records in runs:
        series_of_run = set()
        for record in records:
            for name, value in record.items():
                if name == "step" or name in constants:
                    continue
                family = families.setdefault(name.removeprefix("eval/").split("/")[0], {"points": 0, "series": 0})
                if name not in series_of_run and is_number(value):
                    series_of_run.add(name)
                    family["series"] += 1
                if is_number(value) and math.isfinite(value):
                    family["points"] += 1
    return families


class Checks:
    def __init__(self):
        self.passed = 0
        self.failures = []

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)


def ticks_say_their_values(chart):
    """Each y tick has its own label, and the label reads as the tick's number."""
    splits, ticks = chart["ySplits"], chart["yTicks"]
    scale = max((abs(v) for v in splits), default=1.0)
    return (len(ticks) == len(splits) and len(set(ticks)) == len(ticks) and
            all(abs(float(tick) - split) <= 1e-9 * scale for tick, split in zip(ticks, splits)))


def check_charts(check, charts, runs, run_count):
    constants = constant_metrics(runs)
    expected = expected_charts(runs, constants)
    check(any(c["family"] == "loss" and c["series"] > run_count for c in charts),
          "the loss chart holds no eval/loss series beside the runs' loss")
    check(len(charts) == len(expected),
          f"charts: {','.join(c['family'] for c in charts)} vs families {','.join(expected)}")
    for chart in charts:
        want = expected.get(chart["family"])
        label = f"chart {chart['family']}"
        if want is None:
            check(False, "unexpected " + label)
            continue
        check(chart["points"] == want["points"],
              f"{label}: {chart['points']} points recorded, metrics files hold {want['points']}")
        check(chart["drawn"] == want["points"], f"{label}: dygraphs holds {chart['drawn']} points, "
                                                f"expected {want['points']}")
        check(chart["domPoints"] == want["points"], f"{label}: data-points {chart['domPoints']}, "
                                                    f"expected {want['points']}")
        check(chart["series"] == want["series"] and chart["domSeries"] == want["series"],
              f"{label}: {chart['series']} series (data-series {chart['domSeries']}), expected {want['series']}")
        check(ticks_say_their_values(chart), f"{label}: y-axis labels {chart['yTicks']} for ticks {chart['ySplits']}")
        check(chart["canvasWidth"] > 0 and (want["points"] == 0 or chart["ink"] > 10),
              f"{label}: canvas {chart['canvasWidth']} px wide, {chart['ink']} pixels of the first series' colour")
    return constants


def check_constants_table(check, page, constants):
    rows = page.eval_on_selector_all(
        "table.constants tr", "rows => rows.slice(1).map(r => [...r.cells].map(c => c.textContent))")
    check(len(rows) == len(constants) and all(name in constants and float(value) == constants[name]
                                              for name, value in rows),
          f"constants table {rows} vs {sorted(constants.items())}")


def check_interaction(check, page, family):
    """Drag-zoom, the log-scale switch and the legend's series switch, as a user does them."""
    state = lambda: page.evaluate(CHART_STATE_JS, family)  # noqa: E731
    box = f'.chart[data-family="{family}"]'
    before = state()

    area = page.evaluate("(f) => window.ptrainReport.charts.find((c) => c.family === f).plot.getArea()", family)
    plot = page.locator(box + " .plot").bounding_box()
    y = plot["y"] + area["y"] + area["h"] / 2
    page.mouse.move(plot["x"] + area["x"] + 0.25 * area["w"], y)
    page.mouse.down()
    page.mouse.move(plot["x"] + area["x"] + 0.75 * area["w"], y, steps=8)
    page.mouse.up()
    zoomed = state()
    width_before = before["xRange"][1] - before["xRange"][0]
    width_zoomed = zoomed["xRange"][1] - zoomed["xRange"][0]
    check(zoomed["zoomed"] and width_zoomed < 0.75 * width_before,
          f"{family}: a drag over the middle half zoomed x {before['xRange']} to {zoomed['xRange']}")
    page.mouse.dblclick(plot["x"] + area["x"] + area["w"] / 2, y)
    check(not state()["zoomed"], f"{family}: a double-click did not reset the zoom")

    page.click(box + " .log-y input")
    logged = state()
    check(logged["logscale"] and ticks_say_their_values(logged) and logged["ink"] > 10,
          f"{family}: log y {logged['logscale']}, labels {logged['yTicks']} for {logged['ySplits']}, "
          f"{logged['ink']} px ink")
    page.click(box + " .log-y input")
    check(not state()["logscale"], f"{family}: log y did not switch off")

    page.click(box + ' .legend .series[data-index="0"]')
    hidden = state()
    check(hidden["visibility"][0] is False and hidden["ink"] == 0,
          f"{family}: after a click on its legend entry the first series is visible={hidden['visibility'][0]} "
          f"with {hidden['ink']} px of its colour")
    page.click(box + ' .legend .series[data-index="0"]')
    check(state()["visibility"][0] is True, f"{family}: a second click did not show the first series again")


def main():
    report_path, screenshot_path, *run_dirs = sys.argv[1:]
    check = Checks()
    runs = read_runs(run_dirs)
    with tempfile.TemporaryDirectory(prefix="ptrain-chromium-") as user_data_dir, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            user_data_dir, executable_path=CHROMIUM, headless=True, viewport={"width": 1280, "height": 900},
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            page = context.pages[0] if context.pages else context.new_page()
            external = []

            def only_files(route):
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    external.append(route.request.url)
                    route.abort()

            page.route("**/*", only_files)
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(Path(report_path).resolve().as_uri())
            page.wait_for_function("() => window.ptrainReport && window.ptrainReport.ready", timeout=30000)

            families = page.evaluate("() => window.ptrainReport.charts.map((c) => c.family)")
            charts = [page.evaluate(CHART_STATE_JS, family) for family in families]
            constants = check_charts(check, charts, runs, len(run_dirs))
            check_constants_table(check, page, constants)
            check_interaction(check, page, "loss")
            check(not errors, "page errors: " + "; ".join(errors))
            check(not external, "network requests: " + ", ".join(external))

            screenshot = Path(screenshot_path)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            page.screenshot(path=str(screenshot.with_name(screenshot.stem + "_top.png")))
            check(screenshot.stat().st_size > 10000, f"screenshot {screenshot} is (nearly) empty")
            for c in charts:
                print(f"  {c['family']}: {c['series']} series, {c['points']} points, {c['ink']} px ink, "
                      f"y ticks {', '.join(c['yTicks'])}")
            print("screenshot: " + str(screenshot))
        finally:
            context.close()
    for failure in check.failures:
        print("FAILED: " + failure)
    print(f"{check.passed} passed, {len(check.failures)} failed")
    return 0 if not check.failures else 1


if __name__ == "__main__":
    sys.exit(main())
