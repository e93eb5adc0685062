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
        lines.push({ label: label, byStep: byStep });
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
      series.push({ label: line.label, stroke: palette[i % palette.length], width: 1.5, spanGaps: true,
                    points: { show: xs.length <= 40 } });
    });

    var box = document.createElement('div');
    box.className = 'chart';
    box.id = 'chart-' + familyIndex;
    box.setAttribute('data-family', family.name);
    box.setAttribute('data-series', String(lines.length));
    box.setAttribute('data-points', String(points));
    container.appendChild(box);
    var plot = new uPlot({
      title: family.name,
      width: width,
      height: 240,
      scales: { x: { time: false } },
      axes: [{ label: 'step' }, { size: 70 }],
      series: series
    }, columns, box);
    report.charts.push({ family: family.name, series: lines.length, points: points,
                         labels: lines.map(function (line) { return line.label; }), plot: plot });
  });
  report.ready = true;
})();
