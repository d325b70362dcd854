
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("roofline-data").textContent);
  var chart = document.getElementById("chart");
  var slider = document.getElementById("step");
  var state = { scenario: 0, step: 1, levels: false };
  var levelsBox = document.getElementById("levels");
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  function scen() { return DATA.scenarios[state.scenario]; }
  function traceIndex(name) {
    var data = scen().figure.data;
    for (var i = 0; i < data.length; i++) { if (data[i].name === name) return i; }
    return -1;
  }
  function text(id, value) { document.getElementById(id).textContent = value; }

  // the first `step` kernels, as the arrays of the traces a step rewrites
  function stepTraces(step) {
    var ks = scen().kernels.slice(0, step);
    var kx = [], ky = [], kc = [], kh = [], mx = [], my = [], mh = [], ms = [], msym = [], mc = [], lx = [], ly = [];
    ks.forEach(function (k) {
      kx.push(k.x); ky.push(k.y); kh.push(k.hover);
      kc.push(DATA.colours[k.bound]);
      if (k.x !== null && k.mx !== null) {
        mx.push(k.mx); my.push(k.my); mh.push(k.hover);
        ms.push(k.above_roof ? 15 : 10); msym.push(k.above_roof ? "x" : "diamond-open");
        mc.push(k.above_roof ? DATA.colours.above : DATA.colours[k.bound]);
        lx.push(k.x, k.mx, null); ly.push(k.y, k.my, null);
      }
    });
    var cur = ks.length ? ks[ks.length - 1] : null;
    var cx = cur && cur.x !== null ? [cur.x] : [], cy = cur && cur.x !== null ? [cur.y] : [];
    // the levels toggle: the current kernel at each level other than DRAM (its own point is DRAM's)
    var lvx = [], lvy = [], lvt = [], lvh = [], lvs = [], lvc = [];
    if (state.levels && cur && cur.x !== null) {
      (cur.levels || []).forEach(function (lv) {
        if (lv.level === "dram") return;
        lvx.push(lv.x); lvy.push(cur.y); lvt.push(lv.name); lvh.push(lv.text); lvs.push(lv.symbol);
        lvc.push(lv.colour);
      });
    }
    return {
      kernels: { x: [kx], y: [ky], hovertext: [kh], "marker.color": [kc] },
      measured: { x: [mx], y: [my], hovertext: [mh], "marker.size": [ms], "marker.symbol": [msym],
                  "marker.color": [mc] },
      "measured-link": { x: [lx], y: [ly] },
      current: { x: [cx], y: [cy] },
      levels: { x: [lvx], y: [lvy], text: [lvt], hovertext: [lvh], "marker.symbol": [lvs], "marker.color": [lvc] }
    };
  }

  function showInfo() {
    var s = scen(), k = state.step > 0 ? s.kernels[state.step - 1] : null;
    var info = document.getElementById("info");
    info.className = k ? k.bound : "";
    text("info-name", k ? (k.n + ". " + k.name + (k.count > 1 ? " ×" + k.count : "")) : "no kernel yet");
    var fields = info.querySelectorAll("[data-field]");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i].getAttribute("data-field");
      fields[i].textContent = !k ? "" : (f === "bound" ? k.bound + "-bound" : k.text[f]);
    }
    text("info-derivation", k ? k.derivation : "Press next to add the first kernel.");
    var list = document.getElementById("info-levels");
    while (list.firstChild) list.removeChild(list.firstChild);
    var levels = state.levels && k ? (k.levels || []) : [];
    levels.forEach(function (lv) {
      var li = document.createElement("li");
      li.textContent = lv.text;
      list.appendChild(li);
    });
    list.hidden = !levels.length;
    var meas = document.getElementById("info-measured");
    meas.textContent = k ? k.text.measured : "";
    meas.className = k && k.above_roof ? "above" : "";
    text("info-explain", k ? k.explain : "");
    var n = s.kernels.length;
    // every kernel drawn, and the panel below shows the last one added: the label names both
    text("step-label", state.step === n && n > 1 ? "all " + n + " kernels; below, kernel " + n + " (the last)"
                                                 : "kernel " + state.step + " of " + n);
    var rows = document.querySelectorAll("#kernels-table tbody tr");
    for (var r = 0; r < rows.length; r++) {
      rows[r].className = r === state.step - 1 ? "current" : (r >= state.step ? "future" : "");
    }
  }

  // one step: restyle the kernel traces; no animation frames
  function setStep(step) {
    var n = scen().kernels.length;
    state.step = Math.max(0, Math.min(n, step | 0));
    slider.value = String(state.step);
    var t = stepTraces(state.step);
    Object.keys(t).forEach(function (name) {
      var idx = traceIndex(name);
      if (idx >= 0) Plotly.restyle(chart, t[name], [idx]);
    });
    showInfo();
  }

  function fillTable() {
    var body = document.querySelector("#kernels-table tbody");
    while (body.firstChild) body.removeChild(body.firstChild);
    scen().kernels.forEach(function (k, i) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-n", String(k.n));
      var cells = [k.n, k.name, k.count, k.text.flop, k.text.bytes, k.text.intensity, k.bound, k.text.time,
                   k.text.total, k.text.share, k.text.measured_short];
      cells.forEach(function (c, j) {
        var td = document.createElement("td");
        td.textContent = String(c);
        if (j === 6) td.className = k.bound;
        if (j === 10 && k.above_roof) td.className = "above";
        tr.appendChild(td);
      });
      tr.addEventListener("click", function () { setStep(i + 1); });
      body.appendChild(tr);
    });
  }

  // switching keeps the same kernel, or the one that now contains it ("attention.qk" -> "attention")
  function matchStep(oldKernel, kernels) {
    if (!oldKernel) return 0;
    for (var i = 0; i < kernels.length; i++) { if (kernels[i].name === oldKernel.name) return i + 1; }
    for (var j = 0; j < kernels.length; j++) {
      var a = kernels[j].name, b = oldKernel.name;
      if (b.indexOf(a + ".") === 0 || a.indexOf(b + ".") === 0) return j + 1;
    }
    return Math.min(state.step, kernels.length);
  }

  // the link note and the per-device panel: shown only for a scenario that has them
  function showDevice() {
    var s = scen();
    var note = document.getElementById("link-note");
    note.textContent = s.link_note || "";
    note.hidden = !s.link_note;
    var panel = document.getElementById("device"), d = s.device;
    panel.hidden = !d;
    var body = document.querySelector("#device-table tbody"), bar = document.getElementById("device-bar");
    while (body.firstChild) body.removeChild(body.firstChild);
    while (bar.firstChild) bar.removeChild(bar.firstChild);
    if (!d) return;
    text("device-title", d.title);
    text("device-note", d.note);
    d.bar.forEach(function (part) {
      var span = document.createElement("span");
      span.className = part[0];
      span.style.width = (100 * part[2]).toFixed(2) + "%";
      span.title = part[0] + "-bound";
      bar.appendChild(span);
    });
    d.rows.forEach(function (row) {
      var tr = document.createElement("tr"), th = document.createElement("th"), td = document.createElement("td");
      th.textContent = row[0];
      td.textContent = row[1];
      if (row[2]) td.className = row[2];
      tr.appendChild(th); tr.appendChild(td);
      body.appendChild(tr);
    });
  }


  // --- labels placed for the chart's actual size (it is responsive) ---------------------------------
  // Stage 1: each slope's label at the angle its slope has on screen (one decade up per decade right),
  // its near edge 4 px off the line; the ridge's label right of the ridge if it fits, else at the foot
  // of its dotted line. Stage 2: each slope label slides along its slope until its box is inside the
  // plot and overlaps no other label. Keyed by scenario and size, so each size is placed once.
  var placed = { key: "", stage: 0 };
  function annEl(i) { return chart.querySelector(".annotation[data-index='" + i + "'] rect.bg"); }
  function poly(el) {
    var b = el.getBBox(), m = el.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]].map(
      function (p) { return [m.a * p[0] + m.c * p[1] + m.e, m.b * p[0] + m.d * p[1] + m.f]; });
  }
  function project(p, ax) {
    var lo = Infinity, hi = -Infinity;
    p.forEach(function (q) { var v = q[0] * ax[0] + q[1] * ax[1]; lo = Math.min(lo, v); hi = Math.max(hi, v); });
    return [lo, hi];
  }
  function overlap(p, q, gap) {  // separating axes of two convex polygons
    var polys = [p, q];
    for (var k = 0; k < 2; k++) {
      var r = polys[k];
      for (var i = 0; i < r.length; i++) {
        var a = r[i], b = r[(i + 1) % r.length], len = Math.hypot(b[0] - a[0], b[1] - a[1]) || 1;
        var ax = [(a[1] - b[1]) / len, (b[0] - a[0]) / len];
        var s = project(p, ax), t = project(q, ax);
        if (s[1] + gap <= t[0] || t[1] + gap <= s[0]) return false;
      }
    }
    return true;
  }
  function plotRect() {
    var fl = chart._fullLayout, svg = chart.querySelector(".main-svg").getBoundingClientRect();
    var l = svg.left + fl.xaxis._offset, t = svg.top + fl.yaxis._offset;
    return [l, t, l + fl.xaxis._length, t + fl.yaxis._length];
  }
  function inside(p, r) {
    return p.every(function (q) { return q[0] >= r[0] - 1 && q[0] <= r[2] + 1 && q[1] >= r[1] - 1 && q[1] <= r[3] + 1; });
  }
  function isSlope(a) { return a.name === "slope-label" || a.name === "link-slope-label"; }
  function placeLabels() {
    try { placeLabelsNow(); } catch (e) { /* not rendered (a hidden frame): plotly's own placement stays */ }
  }
  function placeLabelsNow() {
    var fl = chart._fullLayout;
    if (!fl || !fl.xaxis || !fl.annotations) return;
    var xa = fl.xaxis, ya = fl.yaxis, anns = fl.annotations;
    var key = state.scenario + ":" + xa._length + "x" + ya._length;
    if (placed.key !== key) placed = { key: key, stage: 0 };
    if (placed.stage >= 2) return;
    var upd = {};
    if (placed.stage === 0) {
      var perX = xa._length / (xa.range[1] - xa.range[0]), perY = ya._length / (ya.range[1] - ya.range[0]);
      var theta = Math.atan2(perY, perX), right = xa._offset + xa._length - 2;
      anns.forEach(function (a, i) {
        var el = annEl(i);
        if (!el) return;
        var b = el.getBBox();
        if (isSlope(a)) {
          upd["annotations[" + i + "].textangle"] = -theta * 180 / Math.PI;
          var shift = (b.height / 2 + 4) / Math.cos(theta);
          upd["annotations[" + i + "].yshift"] = a.name === "slope-label" ? shift : -shift;
        } else if (a.name === "ridge-label" && xa._offset + xa.l2p(a.x) + 8 + b.width > right) {
          upd["annotations[" + i + "].y"] = ya.range[0];
          upd["annotations[" + i + "].yanchor"] = "bottom";
          upd["annotations[" + i + "].yshift"] = 4;
          upd["annotations[" + i + "].xanchor"] = "right";
          upd["annotations[" + i + "].xshift"] = -4;
        }
      });
    } else {
      var rect = plotRect(), polys = anns.map(function (a, i) { var el = annEl(i); return el ? poly(el) : null; });
      var peak = Math.log10(scen().peak_flop_per_s);
      anns.forEach(function (a, i) {
        if (!isSlope(a) || !polys[i]) return;
        var c = a.y - a.x, lo = Math.max(xa.range[0], ya.range[0] - c), hi = peak - c;
        var x0px = xa.l2p(a.x), y0px = ya.l2p(a.y);
        var fits = function (lx) {
          var dx = xa.l2p(lx) - x0px, dy = ya.l2p(lx + c) - y0px;
          var p = polys[i].map(function (q) { return [q[0] + dx, q[1] + dy]; });
          if (!inside(p, rect)) return null;
          for (var j = 0; j < polys.length; j++) {
            if (j !== i && polys[j] && overlap(p, polys[j], 2)) return null;
          }
          return p;
        };
        for (var d = 0; d <= hi - lo; d += 0.05) {
          var tries = d === 0 ? [a.x] : [a.x - d, a.x + d];
          for (var k = 0; k < tries.length; k++) {
            if (tries[k] < lo || tries[k] > hi) continue;
            var p = fits(tries[k]);
            if (p) {
              polys[i] = p;
              if (d > 0) {
                upd["annotations[" + i + "].x"] = tries[k];
                upd["annotations[" + i + "].y"] = tries[k] + c;
              }
              return;
            }
          }
        }
      });
    }
    placed.stage += 1;
    if (placed.stage >= 2) chart.setAttribute("data-labels", key);
    if (Object.keys(upd).length) Plotly.relayout(chart, upd);
    else placeLabelsNow();
  }

  // a scenario has the toggle when some kernel moves bytes through a level besides DRAM
  function hasLevels(s) {
    return s.kernels.some(function (k) {
      return (k.levels || []).some(function (lv) { return lv.level !== "dram"; });
    });
  }
  function showLevelRoofs() {
    var idx = [];
    scen().figure.data.forEach(function (t, i) { if (t.name.indexOf("level roof ") === 0) idx.push(i); });
    if (idx.length) Plotly.restyle(chart, { visible: state.levels }, idx);
  }
  function setLevels(on) {
    state.levels = !!on && hasLevels(scen());
    levelsBox.checked = state.levels;
    showLevelRoofs();
    setStep(state.step);
  }

  function setScenario(index) {
    var old = state.step > 0 ? scen().kernels[state.step - 1] : null;
    state.scenario = index;
    var s = scen();
    text("summary", s.summary);
    slider.max = String(s.kernels.length);
    // one kernel: nothing to step through
    document.getElementById("stepper").hidden = s.kernels.length < 2;
    var step = matchStep(old, s.kernels);
    var fig = JSON.parse(JSON.stringify(s.figure));
    placed = { key: "", stage: 0 };
    Plotly.react(chart, fig.data, fig.layout, CONFIG);
    fillTable();
    showDevice();
    markSwitch();
    document.getElementById("levels-toggle").hidden = !hasLevels(s);
    state.levels = state.levels && hasLevels(s);
    levelsBox.checked = state.levels;
    showLevelRoofs();
    setStep(step);
  }

  function markSwitch() {
    var s = scen();
    var buttons = document.querySelectorAll("#switch button");
    for (var i = 0; i < buttons.length; i++) {
      var dim = buttons[i].getAttribute("data-dim"), value = buttons[i].getAttribute("data-value");
      buttons[i].className = s[dim] === value ? "on" : "";
    }
  }

  function choose(dim, value) {
    var cur = scen(), best = -1;
    DATA.scenarios.forEach(function (s, i) {
      if (s[dim] !== value) return;
      var same = DATA.switch.every(function (d) { return d === dim || s[d] === cur[d]; });
      if (same) best = i; else if (best < 0) best = i;
    });
    if (best >= 0) setScenario(best);
  }

  function buildSwitch() {
    var box = document.getElementById("switch");
    if (DATA.scenarios.length < 2) return;
    DATA.switch.forEach(function (dim) {
      var group = document.createElement("div");
      group.className = "group";
      group.setAttribute("data-dim", dim);
      var name = document.createElement("span");
      name.textContent = dim === "label" ? "scenario" : dim;
      group.appendChild(name);
      var seen = {};
      DATA.scenarios.forEach(function (s) {
        if (seen[s[dim]]) return;
        seen[s[dim]] = true;
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = s[dim];
        b.setAttribute("data-dim", dim);
        b.setAttribute("data-value", s[dim]);
        b.addEventListener("click", function () { choose(dim, s[dim]); });
        group.appendChild(b);
      });
      box.appendChild(group);
    });
  }

  text("title", DATA.title);
  buildSwitch();
  slider.addEventListener("input", function () { setStep(parseInt(slider.value, 10)); });
  document.getElementById("prev").addEventListener("click", function () { setStep(state.step - 1); });
  document.getElementById("next").addEventListener("click", function () { setStep(state.step + 1); });
  document.getElementById("all").addEventListener("click", function () { setStep(scen().kernels.length); });
  levelsBox.addEventListener("change", function () { setLevels(levelsBox.checked); });
  // ← → one kernel, Home the first, End all; the slider's own keys (it has focus) already step it
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.defaultPrevented) return;
    var tag = e.target && e.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    var n = scen().kernels.length;
    var to = { ArrowLeft: state.step - 1, ArrowRight: state.step + 1, Home: 1, End: n }[e.key];
    if (to === undefined || n < 2) return;
    e.preventDefault();
    setStep(to);
  });
  // opens on every kernel: the first kernel of a model (the embedding) has no FLOPs and no point
  state.step = 0;
  setScenario(0);
  chart.on("plotly_afterplot", placeLabels);
  placeLabels();
  setStep(scen().kernels.length);
  window.roofline = { state: state, setStep: setStep, setScenario: setScenario, setLevels: setLevels, data: DATA };
  document.body.setAttribute("data-ready", "1");
})();
