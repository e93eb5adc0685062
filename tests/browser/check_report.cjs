// Opens a `ptrain report` page in headless Debian Chromium (playwright-core,
// never a downloaded browser), checks that every metric family has a chart
// holding exactly the points its runs' metrics.jsonl files hold (eval/<m>
// in the chart of <m>; metrics constant over the runs in the summary table
// instead), that each chart drew its first series on the canvas, that its
// y-axis labels are distinct and say their ticks' values, that the page asked
// for nothing over the network, and saves a screenshot.
//   node check_report.cjs PLAYWRIGHT_CORE_DIR REPORT.html SCREENSHOT.png RUN_DIR...
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const [playwrightDir, reportPath, screenshotPath, ...runDirs] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

function readRuns() {
  return runDirs.map((dir) => fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').split('\n')
    .filter((l) => l.trim()).map((line) => JSON.parse(line)));
}

// name → value of the metrics with one finite value at every step that logs
// them, in every run, over at least two steps.
function constantMetrics() {
  const seen = new Map();
  for (const records of readRuns()) {
    for (const record of records) {
      for (const [name, value] of Object.entries(record)) {
        if (name === 'step' || typeof value !== 'number' || !Number.isFinite(value)) continue;
        const metric = seen.get(name) || { value, count: 0, differs: false };
        metric.differs = metric.differs || value !== metric.value;
        metric.count += 1;
        seen.set(name, metric);
      }
    }
  }
  return new Map([...seen].filter(([, m]) => !m.differs && m.count >= 2).map(([name, m]) => [name, m.value]));
}

// family → {points, series}: counted from the metrics files, independently of the page.
function expectedCharts() {
  const constants = constantMetrics();
  const families = new Map();
  for (const records of readRuns()) {
    const seriesOfRun = new Set();
    for (const record of records) {
      for (const [name, value] of Object.entries(record)) {
        if (name === 'step' || constants.has(name)) continue;
        const family = name.replace(/^eval\//, '').split('/')[0];
        if (!families.has(family)) families.set(family, { points: 0, series: 0 });
        if (!seriesOfRun.has(name) && typeof value === 'number') {
          seriesOfRun.add(name);
          families.get(family).series += 1;
        }
        if (typeof value === 'number' && Number.isFinite(value)) families.get(family).points += 1;
      }
    }
  }
  return families;
}

async function main() {
  const failures = [];
  let passed = 0;
  const check = (ok, what) => (ok ? (passed += 1) : failures.push(what));

  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ptrain-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  try {
    const page = context.pages()[0] || (await context.newPage());
    const external = [];
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith('file:')) return route.continue();
      external.push(url);
      return route.abort();
    });
    const errors = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto('file://' + path.resolve(reportPath));
    await page.waitForFunction(() => window.ptrainReport && window.ptrainReport.ready, null, { timeout: 30000 });

    const charts = await page.evaluate(() => window.ptrainReport.charts.map((chart) => {
      const box = document.querySelector('.chart[data-family="' + chart.family + '"]');
      const drawn = chart.plot.data.slice(1).reduce(
        (sum, column) => sum + column.filter((v) => v !== null && v !== undefined).length, 0);
      // Pixels near the first series' colour (#1f77b4), anti-aliasing allowed.
      const canvas = chart.plot.ctx.canvas;
      const pixels = chart.plot.ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      let ink = 0;
      for (let i = 0; i < pixels.length; i += 4) {
        if (Math.abs(pixels[i] - 31) < 40 && Math.abs(pixels[i + 1] - 119) < 40 && Math.abs(pixels[i + 2] - 180) < 40 &&
            pixels[i + 3] > 128) ink += 1;
      }
      return { family: chart.family, series: chart.series, points: chart.points, drawn,
               domPoints: Number(box.getAttribute('data-points')), domSeries: Number(box.getAttribute('data-series')),
               canvasWidth: canvas.width, ink, yTicks: chart.yTicks.slice(),
               ySplits: chart.ySplits.slice() };
    }));
    const constantRows = await page.evaluate(() => [...document.querySelectorAll('table.constants tr')].slice(1)
      .map((row) => [...row.cells].map((cell) => cell.textContent)));

    const expected = expectedCharts();
    const constants = constantMetrics();
    check(constantRows.length === constants.size &&
          constantRows.every(([name, value]) => constants.has(name) && Number(value) === constants.get(name)),
          `constants table ${JSON.stringify(constantRows)} vs ${JSON.stringify([...constants])}`);
    check(charts.some((c) => c.family === 'loss' && c.series > runDirs.length),
          'the loss chart holds no eval/loss series beside the runs\' loss');
    check(errors.length === 0, 'page errors: ' + errors.join('; '));
    check(external.length === 0, 'network requests: ' + external.join(', '));
    check(charts.length === expected.size,
          `charts: ${charts.map((c) => c.family).join(',')} vs families ${[...expected.keys()].join(',')}`);
    for (const chart of charts) {
      const want = expected.get(chart.family);
      if (!want) { failures.push('unexpected chart ' + chart.family); continue; }
      const label = `chart ${chart.family}`;
      check(chart.points === want.points, `${label}: ${chart.points} points recorded, metrics files hold ${want.points}`);
      check(chart.drawn === want.points, `${label}: uPlot holds ${chart.drawn} points, expected ${want.points}`);
      check(chart.domPoints === want.points, `${label}: data-points ${chart.domPoints}, expected ${want.points}`);
      check(chart.series === want.series && chart.domSeries === want.series,
            `${label}: ${chart.series} series (data-series ${chart.domSeries}), expected ${want.series}`);
      // Each y tick has its own label, and the label reads as a number.
      const scale = Math.max(...chart.ySplits.map(Math.abs));
      check(chart.yTicks.length === chart.ySplits.length && new Set(chart.yTicks).size === chart.yTicks.length &&
            chart.yTicks.every((tick, i) => Math.abs(Number(tick) - chart.ySplits[i]) <= 1e-9 * scale),
            `${label}: y-axis labels ${JSON.stringify(chart.yTicks)} for ticks ${JSON.stringify(chart.ySplits)}`);
      check(chart.canvasWidth > 0 && (want.points === 0 || chart.ink > 10),
            `${label}: canvas ${chart.canvasWidth} px wide, ${chart.ink} pixels of the first series' colour`);
    }
    fs.mkdirSync(path.dirname(screenshotPath), { recursive: true });
    await page.screenshot({ path: screenshotPath, fullPage: true });
    await page.screenshot({ path: screenshotPath.replace(/\.png$/, '_top.png') });  // what opening it shows first
    check(fs.statSync(screenshotPath).size > 10000, 'screenshot ' + screenshotPath + ' is (nearly) empty');
    console.log(charts.map((c) => `  ${c.family}: ${c.series} series, ${c.points} points, ${c.ink} px ink, ` +
                           `y ticks ${c.yTicks.join(', ')}`).join('\n'));
    console.log('screenshot: ' + screenshotPath);
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  for (const failure of failures) console.log('FAILED: ' + failure);
  console.log(`${passed} passed, ${failures.length} failed`);
  process.exit(failures.length === 0 ? 0 : 1);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
