
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("serve-data").textContent);
  var chart = document.getElementById("chart");
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  function cell(tr, tag, value, cls) {
    var el = document.createElement(tag);
    el.textContent = value;
    if (cls) el.className = cls;
    tr.appendChild(el);
    return el;
  }

  document.getElementById("title").textContent = DATA.title;
  document.getElementById("subtitle").textContent = DATA.subtitle;

  var summary = document.querySelector("#summary tbody");
  DATA.summary.forEach(function (row) {
    var tr = document.createElement("tr");
    cell(tr, "th", row[0]);
    var td = cell(tr, "td", row[1]);
    if (row[2]) {
      td.appendChild(document.createElement("br"));
      var note = document.createElement("span");
      note.className = "note";
      note.textContent = row[2];
      td.appendChild(note);
    }
    summary.appendChild(tr);
  });

  var warnings = document.getElementById("warnings");
  DATA.warnings.forEach(function (w) {
    var li = document.createElement("li");
    li.textContent = "warning: " + w;
    warnings.appendChild(li);
  });

  var body = document.querySelector("#curve-table tbody");
  DATA.curve.forEach(function (c) {
    var tr = document.createElement("tr");
    var marks = [];
    if (c.knee) marks.push("knee");
    if (c.fits === false) marks.push("does not fit");
    if (c.meets_itl_slo === false) marks.push("misses the ITL SLO");
    tr.className = [c.knee ? "knee" : "", c.fits === false ? "nofit" : "", c.batch === DATA.batch ? "chosen" : ""]
      .join(" ").trim();
    cell(tr, "td", String(c.batch));
    cell(tr, "td", c.text.itl);
    cell(tr, "td", c.text.tokens);
    cell(tr, "td", c.text.per_device);
    cell(tr, "td", c.fits === null ? "?" : (c.fits ? "yes" : "no"));
    cell(tr, "td", marks.join("; "));
    body.appendChild(tr);
  });

  Plotly.newPlot(chart, DATA.figure.data, DATA.figure.layout, CONFIG).then(function () {
    window.roofline = { data: DATA };
    document.body.setAttribute("data-ready", "1");
  });
})();
