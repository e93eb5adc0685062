// Draws one dygraphs chart per metric family from the JSON in #ptrain-data,
// all runs overlaid, and records what each chart holds in window.ptrainReport
// (and in data-* attributes) so that tests can check what was drawn. Each
// chart zooms (drag; double-click resets; shift-drag pans), switches its y
// axis to a log scale, and hides or shows a series from its legend.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('ptrain-data').textContent);
  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
                 '#bcbd22', '#17becf'];
  var report = { charts: [], ready: false };
  window.ptrainReport = report;
  var container = document.getElementById('charts');
  var width = Math.max(320, Math.floor((container.clientWidth - 24) / 2));
  if (data.families.length > 0) {
    container.insertAdjacentHTML('beforebegin', '<p class="hint">Drag to zoom (double-click resets, shift-drag ' +
                                 'pans); click a legend entry to hide or show its series.</p>');
  }

  function isNumber(value) { return typeof value === 'number' && isFinite(value); }

  // A value with `digits` significant digits, without trailing zeros.
  function formatNumber(value, digits) {
    if (value === 0) return '0';
    var magnitude = Math.abs(value);
    if (magnitude >= 1e-4 && magnitude < 1e15) return String(Number(value.toPrecision(digits)));
    return value.toExponential(digits - 1).replace(/\.?0+e/, 'e');
  }

  // The fewest significant digits that give every tick its own label and its
  // own value (two digits would read "0.001, 0.001, 0.0015" on a decaying
  // lr): ticks are round numbers, so a few digits say them exactly.
  function distinctTickLabels(values) {
    var spacing = Infinity;
    for (var i = 1; i < values.length; i += 1) spacing = Math.min(spacing, Math.abs(values[i] - values[i - 1]));
    if (!isFinite(spacing) || spacing === 0) spacing = Math.abs(values[0] || 1);
    for (var digits = 1; digits <= 17; digits += 1) {
      var labels = values.map(function (value) { return formatNumber(value, digits); });
      var unique = {};
      var exact = labels.every(function (label, i) {
        unique[label] = true;
        return Math.abs(Number(label) - values[i]) <= 1e-6 * spacing;
      });
      if (exact && Object.keys(unique).length === labels.length) return labels;
    }
    return values.map(String);
  }

  // The lines of one family: a series per run and metric that has a finite value somewhere.
  function familyLines(family) {
    var lines = [];
    data.runs.forEach(function (run) {
      family.metrics.forEach(function (metric) {
        var values = run.metrics[metric];
        if (!values) return;
        var byStep = {};
        var finite = 0;
        run.steps.forEach(function (step, i) {
          if (isNumber(values[i])) { byStep[step] = values[i]; finite += 1; }
        });
        if (finite === 0) return;  // never finite in this run: nothing to draw
        var label = data.runs.length > 1 ? run.name + (family.metrics.length > 1 ? ': ' + metric : '') : metric;
        lines.push({ label: label, byStep: byStep, evaluation: metric.indexOf('eval/') === 0 });
      });
    });
    return lines;
  }

  // Runs log different steps: the rows are the union of steps, gaps are nulls.
  function rowsOf(lines) {
    var stepSet = {};
    lines.forEach(function (line) { Object.keys(line.byStep).forEach(function (step) { stepSet[step] = true; }); });
    return Object.keys(stepSet).map(Number).sort(function (a, b) { return a - b; }).map(function (x) {
      return [x].concat(lines.map(function (line) { return x in line.byStep ? line.byStep[x] : null; }));
    });
  }

  // Every series with a swatch of its line; a click shows or hides it, and
  // the values under the cursor follow the labels.
  function legendHtml(legend, lines) {
    var visible = legend.dygraph.visibility();
    var html = legend.x === undefined ? '' : '<span class="at">step ' + legend.x + '</span>';
    legend.series.forEach(function (series, i) {
      html += '<span class="series' + (visible[i] ? '' : ' hidden') + '" data-index="' + i + '">' +
              '<span class="swatch" style="border-bottom: 2px ' + (lines[i].evaluation ? 'dashed ' : 'solid ') +
              series.color + '"></span><span style="color: ' + series.color + '">' + series.labelHTML + '</span>' +
              (visible[i] && series.yHTML !== undefined ? ': ' + series.yHTML : '') + '</span>';
    });
    return html;
  }

  function element(tag, className, parent) {
    var node = document.createElement(tag);
    node.className = className;
    parent.appendChild(node);
    return node;
  }

  // The title line: the family's name and the log-scale switch, disabled
  // where a value is not positive (a log axis has no place for it).
  function chartHead(box, family, rows) {
    var head = element('div', 'head', box);
    element('span', 'title', head).textContent = family.name;
    var label = element('label', 'log-y', head);
    var checkbox = element('input', '', label);
    checkbox.type = 'checkbox';
    label.appendChild(document.createTextNode(' log y'));
    var positive = rows.every(function (row) { return row.slice(1).every(function (v) { return v === null || v > 0; }); });
    checkbox.disabled = !positive;
    if (!positive) label.title = 'a value is zero or negative';
    return checkbox;
  }

  // Steps are whole numbers: ticks between them would label no step.
  function wholeStepTicker(low, high, pixels, opts, dygraph, values) {
    return Dygraph.numericTicks(low, high, pixels, opts, dygraph, values).filter(function (tick) {
      return Math.abs(tick.v - Math.round(tick.v)) < 1e-9;
    });
  }

  // dygraphs' own y ticks, labelled so that each says its value (recorded in
  // `chart`); under a log scale only the ticks dygraphs labels keep a label.
  function distinctYTicker(chart) {
    return function (low, high, pixels, opts, dygraph, values) {
      var ticks = Dygraph.numericTicks(low, high, pixels, opts, dygraph, values);
      var labelled = ticks.filter(function (tick) { return tick.label !== ''; });
      chart.ySplits = labelled.map(function (tick) { return tick.v; });
      chart.yTicks = distinctTickLabels(chart.ySplits);
      labelled.forEach(function (tick, i) { tick.label = chart.yTicks[i]; });
      return ticks;
    };
  }

  function plotOptions(chart, lines, rows, legendDiv) {
    var series = {};
    lines.forEach(function (line) {
      // An evaluation's curve is dashed, beside its training counterpart.
      series[line.label] = { strokePattern: line.evaluation ? [6, 4] : null,
                             drawPoints: rows.length <= 40 || line.evaluation };
    });
    return {
      labels: ['step'].concat(chart.labels),
      colors: lines.map(function (line, i) { return palette[i % palette.length]; }),
      series: series,
      width: width,
      height: 240,
      xlabel: 'step',
      strokeWidth: 1.5,
      pointSize: 2,
      connectSeparatedPoints: true,
      xRangePad: 6,  // pixels: a point on the first or last step is drawn whole
      // One step would make an x range of no width, the point on the axis.
      dateWindow: rows.length === 1 ? [rows[0][0] - 1, rows[0][0] + 1] : null,
      legend: 'always',
      labelsDiv: legendDiv,
      legendFormatter: function (legend) { return legendHtml(legend, lines); },
      axes: {
        x: { valueFormatter: String, ticker: wholeStepTicker },
        y: { axisLabelWidth: 70, valueFormatter: function (value) { return formatNumber(value, 6); },
             ticker: distinctYTicker(chart) }
      }
    };
  }

  function addChart(family, familyIndex) {
    var lines = familyLines(family);
    var rows = rowsOf(lines);
    var points = rows.reduce(function (sum, row) {
      return sum + row.slice(1).filter(function (v) { return v !== null; }).length;
    }, 0);
    var box = element('div', 'chart', container);
    box.id = 'chart-' + familyIndex;
    box.setAttribute('data-family', family.name);
    box.setAttribute('data-series', String(lines.length));
    box.setAttribute('data-points', String(points));
    var logCheckbox = chartHead(box, family, rows);
    var plotDiv = element('div', 'plot', box);
    var legendDiv = element('div', 'legend', box);
    var chart = { family: family.name, series: lines.length, points: points,
                  labels: lines.map(function (line) { return line.label; }), yTicks: [], ySplits: [] };
    chart.plot = new Dygraph(plotDiv, rows, plotOptions(chart, lines, rows, legendDiv));
    if (lines.length === 0) legendDiv.textContent = 'no finite value in any run';
    legendDiv.addEventListener('click', function (event) {
      var entry = event.target.closest('.series');
      if (!entry) return;
      var index = Number(entry.getAttribute('data-index'));
      chart.plot.setVisibility(index, !chart.plot.visibility()[index]);
    });
    logCheckbox.addEventListener('change', function () {
      chart.plot.updateOptions({ logscale: logCheckbox.checked });
    });
    report.charts.push(chart);
  }

  data.families.forEach(addChart);
  report.ready = true;
})();
