(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("timeline-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var svg = document.getElementById("timeline");
  var tip = document.getElementById("tip");
  var status = document.getElementById("timeline-status");
  var nodeSel = document.getElementById("node-filter");
  var LABEL = 170, LANE = 22, TOP = 24, W = Math.max(900, (window.innerWidth || 1200) - 60);
  var full = [D.t0, D.t1 > D.t0 ? D.t1 : D.t0 + 1000];
  var view = full.slice();
  function el(name, attrs, parent) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(ns) { return (ns / 1000).toFixed(3) + " us"; }
  function axisLabel(ns, span) {
    if (span > 5e9) return (ns / 1e9).toFixed(2) + " s";
    if (span > 5e6) return (ns / 1e9).toFixed(5) + " s";
    return (ns / 1000).toFixed(3) + " us";
  }
  var hideEmpty = document.getElementById("hide-empty");
  function lanesShown() {
    var want = nodeSel.value, busy = null;
    if (hideEmpty.checked) {
      busy = {};
      D.items.forEach(function (it) {
        if (it.t + (it.d || 0) >= view[0] && it.t <= view[1]) busy[it.lane] = true;
      });
    }
    return D.lanes.filter(function (l) {
      return (want === "all" || l.node === want) && (!busy || busy[l.key]);
    });
  }
  function draw() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var lanes = lanesShown();
    var idx = {};
    lanes.forEach(function (l, i) { idx[l.key] = i; });
    var H = TOP + lanes.length * LANE + 10;
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    var span = view[1] - view[0], plotW = W - LABEL - 10;
    function x(t) { return LABEL + (t - view[0]) / span * plotW; }
    var axis = el("g", {"class": "axis"}, svg);
    for (var k = 0; k <= 8; k++) {
      var t = view[0] + span * k / 8, xx = x(t);
      el("line", {x1: xx, x2: xx, y1: TOP - 4, y2: H}, axis);
      var tx = el("text", {x: xx + 2, y: 12}, axis); tx.textContent = axisLabel(t, span);
    }
    lanes.forEach(function (l, i) {
      var g = el("g", {"class": "lane", "data-lane": l.name, "data-node": l.node}, svg);
      el("rect", {"class": "lane-bg" + (i % 2 ? " odd" : ""), x: 0, y: TOP + i * LANE, width: W, height: LANE}, g);
      var tx = el("text", {"class": "lane-label", x: 4, y: TOP + i * LANE + 15}, g);
      tx.textContent = l.node + " " + l.name;
    });
    var drawn = 0, hidden = 0, pos = {}, lastPx = {};
    D.items.forEach(function (it) {
      var li = idx[it.lane];
      if (li === undefined) return;
      var t0 = it.t, t1 = it.t + (it.d || 0);
      if (t1 < view[0] || t0 > view[1]) return;
      // One mark per pixel, lane and kind: a zoomed-out view of a long
      // trace stays a few thousand elements (errors always drawn).
      var px = Math.round(x(t0)) + ":" + Math.round(x(t1)), lk = it.lane + it.k + (it.dir || "");
      if (lastPx[lk] === px && !it.e) { hidden++; return; }
      lastPx[lk] = px;
      var y = TOP + li * LANE, e;
      if (it.k === "wqe" || it.k === "cmd" || it.k === "pkt") {
        var h = it.k === "pkt" ? 6 : 12, yy = it.k === "pkt" ? y + (it.dir === "send" ? 2 : 14) : y + 5;
        var w = Math.max(2, x(t1) - x(t0));
        e = el("rect", {"class": it.k + (it.dir ? " " + it.dir : "") + (it.e ? " err" : ""), x: x(t0), y: yy,
                        width: w, height: h}, svg);
        if (it.k === "pkt" && it.id) {
          (pos[it.id] = pos[it.id] || []).push([x(t0), yy + 3, it.dir]);
        }
      } else {
        e = el("line", {"class": it.k + (it.e ? " err" : ""), x1: x(t0), x2: x(t0), y1: y + 2, y2: y + LANE - 2}, svg);
      }
      e.setAttribute("data-tip", it.n + "  @ " + fmt(it.t) + (it.d ? "  dur " + fmt(it.d) : "") +
                     (it.s ? "\n" + it.s : ""));
      drawn++;
    });
    // Flow lines: a packet from its sender to its receiver.
    var flows = 0;
    Object.keys(pos).forEach(function (id) {
      var p = pos[id], s = null, r = null;
      p.forEach(function (q) { if (q[2] === "send") s = q; else r = q; });
      if (s && r) { el("line", {"class": "flow", x1: s[0], y1: s[1], x2: r[0], y2: r[1]}, svg); flows++; }
    });
    status.textContent = drawn + " items in " + lanes.length + " lanes, " + flows + " packet flows" +
                         (hidden ? " (" + hidden + " more under them: zoom in)" : "") + "; window " +
                         fmt(view[0]) + " .. " + fmt(view[1]) + (D.truncated ? " (first " + D.items.length +
                         " items of the trace)" : "");
    svg.setAttribute("data-drawn", String(drawn));
    document.body.setAttribute("data-rendered", "ok");
  }
  svg.addEventListener("mousemove", function (ev) {
    var t = ev.target.getAttribute && ev.target.getAttribute("data-tip");
    if (!t) { tip.style.display = "none"; return; }
    tip.textContent = t; tip.style.display = "block";
    tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
  });
  svg.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  var dragFrom = null;
  function tAt(ev) {
    var r = svg.getBoundingClientRect(), px = ev.clientX - r.left;
    return view[0] + (px - LABEL) / (W - LABEL - 10) * (view[1] - view[0]);
  }
  svg.addEventListener("mousedown", function (ev) { dragFrom = tAt(ev); });
  svg.addEventListener("mouseup", function (ev) {
    if (dragFrom === null) return;
    var a = dragFrom, b = tAt(ev); dragFrom = null;
    if (Math.abs(b - a) > (view[1] - view[0]) / 500) { view = [Math.min(a, b), Math.max(a, b)]; draw(); }
  });
  svg.addEventListener("dblclick", function () { view = full.slice(); draw(); });
  function zoom(f) {
    var c = (view[0] + view[1]) / 2, h = (view[1] - view[0]) * f / 2;
    view = [c - h, c + h]; draw();
  }
  function pan(f) { var d = (view[1] - view[0]) * f; view = [view[0] + d, view[1] + d]; draw(); }
  document.getElementById("zoom-in").onclick = function () { zoom(0.5); };
  document.getElementById("zoom-out").onclick = function () { zoom(2); };
  document.getElementById("pan-left").onclick = function () { pan(-0.5); };
  document.getElementById("pan-right").onclick = function () { pan(0.5); };
  document.getElementById("reset").onclick = function () { view = full.slice(); draw(); };
  document.getElementById("first-wqe").onclick = function () {
    var w = D.items.filter(function (it) { return it.k === "wqe"; })[0];
    if (w) { view = [w.t - 200000, w.t + (w.d || 0) + 800000]; draw(); }
  };
  nodeSel.onchange = draw;
  hideEmpty.onchange = draw;
  D.nodes.forEach(function (n) { var o = document.createElement("option"); o.value = n; o.textContent = n;
                                 nodeSel.appendChild(o); });
  // Start on the busiest part: the first WQE with some context, if any.
  var firstWqe = D.items.filter(function (it) { return it.k === "wqe"; })[0];
  if (firstWqe && D.zoomFirst) view = [firstWqe.t - 200000, firstWqe.t + (firstWqe.d || 0) + 800000];
  draw();
})();
