// With #e2e in the URL, the page writes what the browser laid out (each
// lane's, bar's and marker's box and label) into #e2e-layout as JSON, so an
// end-to-end test can read the rendered page back through the browser.
(function () {
  if (location.hash !== "#e2e") return;
  function box(el) {
    var r = el.getBoundingClientRect();
    return { x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height };
  }
  function text(el) { return el ? el.textContent : null; }
  var svg = document.getElementById("timeline-svg");
  var out = { svg: box(svg), scripts: document.scripts.length, lanes: [], bars: [], markers: [], links: [], arms: [] };
  svg.querySelectorAll("g.lane").forEach(function (g) {
    out.lanes.push({ phase: g.dataset.phase, index: +g.dataset.index, label: text(g.querySelector(".lane-label")), box: box(g.querySelector(".lane-bg")) });
  });
  svg.querySelectorAll("g.bar").forEach(function (g) {
    var label = g.querySelector(".bar-label");
    out.bars.push({ seq: +g.dataset.seq, lane: +g.dataset.lane, status: g.dataset.status, label: text(label),
      box: box(g.querySelector(".bar-rect")), label_box: box(label),
      fill: getComputedStyle(g.querySelector(".bar-rect")).fill });
  });
  svg.querySelectorAll("g.marker, g.checkpoint").forEach(function (g) {
    var kind = g.classList.contains("crash") ? "crash" : g.classList.contains("resume") ? "resume" : "checkpoint";
    var label = g.querySelector(".marker-label");
    out.markers.push({ kind: kind, label: kind === "checkpoint" ? g.dataset.reason : text(label), box: box(g.querySelector("line")),
      label_box: label ? box(label) : null });
  });
  svg.querySelectorAll(".replay-link").forEach(function (p) {
    out.links.push({ from: +p.dataset.from, to: +p.dataset.to, box: box(p) });
  });
  document.querySelectorAll(".arm").forEach(function (a) {
    out.arms.push({ arm: a.dataset.arm, box: box(a), runs: a.querySelectorAll(".run").length });
  });
  out.spreads = [];
  document.querySelectorAll(".spreads tr[data-metric]").forEach(function (tr) {
    var ranges = [];
    tr.querySelectorAll("g.range").forEach(function (g) { ranges.push({ arm: g.dataset.arm, box: box(g.querySelector("line")) }); });
    out.spreads.push({ metric: tr.dataset.metric, ranges: ranges });
  });
  out.one_line = [];
  document.querySelectorAll("table.dispatches th, table.dispatches .pill, table.comparison th, table.comparison .pill, td.short").forEach(function (el) {
    var r = document.createRange();
    r.selectNodeContents(el);
    var rects = r.getClientRects();
    out.one_line.push({ text: el.textContent, h: r.getBoundingClientRect().height, line: rects.length ? rects[0].height : 0 });
  });
  var pre = document.getElementById("e2e-layout");
  pre.textContent = JSON.stringify(out);
})();
