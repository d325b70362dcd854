(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("train-data").textContent);
  var chart = document.getElementById("chart");
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  function cell(tr, tag, value) {
    var el = document.createElement(tag);
    el.textContent = value;
    tr.appendChild(el);
    return el;
  }

  document.getElementById("title").textContent = DATA.title;
  document.getElementById("subtitle").textContent = DATA.subtitle;
  document.getElementById("conventions").textContent = DATA.conventions;

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

  var body = document.querySelector("#communication tbody");
  DATA.communication.forEach(function (c) {
    var tr = document.createElement("tr");
    [c.name, c.parallelism, c.kind, c.algorithm, c.message, String(c.group), c.roof, c.runs, c.time]
      .forEach(function (v) { cell(tr, "td", v); });
    body.appendChild(tr);
  });

  Plotly.newPlot(chart, DATA.figure.data, DATA.figure.layout, CONFIG).then(function () {
    window.roofline = { data: DATA };
    document.body.setAttribute("data-ready", "1");
  });
})();
