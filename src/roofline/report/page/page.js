
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("roofline-data").textContent);
  var chart = document.getElementById("chart");
  var slider = document.getElementById("step");
  var state = { scenario: 0, step: 1 };
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
    return {
      kernels: { x: [kx], y: [ky], hovertext: [kh], "marker.color": [kc] },
      measured: { x: [mx], y: [my], hovertext: [mh], "marker.size": [ms], "marker.symbol": [msym],
                  "marker.color": [mc] },
      "measured-link": { x: [lx], y: [ly] },
      current: { x: [cx], y: [cy] }
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
    var meas = document.getElementById("info-measured");
    meas.textContent = k ? k.text.measured : "";
    meas.className = k && k.above_roof ? "above" : "";
    text("info-explain", k ? k.explain : "");
    text("step-label", "kernel " + state.step + " of " + s.kernels.length);
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

  function setScenario(index) {
    var old = state.step > 0 ? scen().kernels[state.step - 1] : null;
    state.scenario = index;
    var s = scen();
    text("summary", s.summary);
    slider.max = String(s.kernels.length);
    var step = matchStep(old, s.kernels);
    var fig = JSON.parse(JSON.stringify(s.figure));
    Plotly.react(chart, fig.data, fig.layout, CONFIG);
    fillTable();
    showDevice();
    markSwitch();
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
  state.step = 1;
  setScenario(0);
  setStep(1);
  window.roofline = { state: state, setStep: setStep, setScenario: setScenario, data: DATA };
  document.body.setAttribute("data-ready", "1");
})();
