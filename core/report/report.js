// Draws one uPlot chart per metric family from the JSON in #ptrain-data, all
// runs overlaid, and records what each chart holds in window.ptrainReport
// (and in data-* attributes) so that tests can check what was drawn.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('ptrain-data').textContent);
  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
                 '#bcbd22', '#17becf'];
  var report = { charts: [], ready: false };
  window.ptrainReport = report;
  var container = document.getElementById('charts');
  var width = Math.max(320, Math.floor((container.clientWidth - 24) / 2));

  function isNumber(value) { return typeof value === 'number' && isFinite(value); }

  // A tick's label with `digits` significant digits, without trailing zeros.
  function tickLabel(value, digits) {
    if (value === 0) return '0';
    var magnitude = Math.abs(value);
    if (magnitude >= 1e-4 && magnitude < 1e15) return String(Number(value.toPrecision(digits)));
    return value.toExponential(digits - 1).replace(/\.?0+e/, 'e');
  }

  // The fewest significant digits that give every tick its own label and
  // its own value (uPlot's labels read "0.002, 0.002, 0.001, 0.001" on a
  // decaying lr): ticks are round numbers, so a few digits say them exactly.
  function distinctTickLabels(values) {
    var spacing = values.length > 1 ? Math.abs(values[1] - values[0]) : Math.abs(values[0] || 1);
    for (var digits = 1; digits <= 17; digits += 1) {
      var labels = values.map(function (value) { return tickLabel(value, digits); });
      var unique = {};
      var exact = labels.every(function (label, i) {
        unique[label] = true;
        return Math.abs(Number(label) - values[i]) <= 1e-6 * spacing;
      });
      if (exact && Object.keys(unique).length === labels.length) return labels;
    }
    return values.map(String);
  }

  data.families.forEach(function (family, familyIndex) {
    // Runs log different steps: the x axis is the union, gaps are nulls.
    var stepSet = {};
    var lines = [];
    data.runs.forEach(function (run) {
      family.metrics.forEach(function (metric) {
        var values = run.metrics[metric];
        if (!values) return;
        var byStep = {};
        run.steps.forEach(function (step, i) {
          if (isNumber(values[i])) { byStep[step] = values[i]; stepSet[step] = true; }
        });
        if (Object.keys(byStep).length === 0) return;  // never finite in this run: nothing to draw
        var label = data.runs.length > 1 ? run.name + (family.metrics.length > 1 ? ': ' + metric : '') : metric;
        lines.push({ label: label, byStep: byStep, evaluation: metric.indexOf('eval/') === 0 });
      });
    });
    var xs = Object.keys(stepSet).map(Number).sort(function (a, b) { return a - b; });
    var columns = [xs];
    var series = [{ label: 'step' }];
    var points = 0;
    lines.forEach(function (line, i) {
      columns.push(xs.map(function (x) {
        if (x in line.byStep) { points += 1; return line.byStep[x]; }
        return null;
      }));
      // An evaluation's curve is dashed, beside its training counterpart.
      series.push({ label: line.label, stroke: palette[i % palette.length], width: 1.5, spanGaps: true,
                    dash: line.evaluation ? [6, 4] : undefined, points: { show: xs.length <= 40 || line.evaluation } });
    });

    var box = document.createElement('div');
    box.className = 'chart';
    box.id = 'chart-' + familyIndex;
    box.setAttribute('data-family', family.name);
    box.setAttribute('data-series', String(lines.length));
    box.setAttribute('data-points', String(points));
    container.appendChild(box);
    var chart = { family: family.name, series: lines.length, points: points,
                  labels: lines.map(function (line) { return line.label; }), yTicks: [], ySplits: [] };
    var plot = new uPlot({
      title: family.name,
      width: width,
      height: 240,
      scales: { x: { time: false } },
      axes: [{ label: 'step' }, {
        size: 70,
        values: function (u, splits) {
          chart.ySplits = splits.slice();
          chart.yTicks = distinctTickLabels(splits);
          return chart.yTicks;
        }
      }],
      series: series
    }, columns, box);
    chart.plot = plot;
    report.charts.push(chart);
  });
  report.ready = true;
})();
