(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("train-data").textContent);
  var chart = document.getElementById("chart");
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  var cell = rooflineTables.cell;
  rooflineTables.heading(DATA);
  document.getElementById("conventions").textContent = DATA.conventions;

  rooflineTables.summary(document.querySelector("#summary tbody"), DATA.summary);
  rooflineTables.warnings(document.getElementById("warnings"), DATA.warnings);

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
