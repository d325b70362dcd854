
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("serve-data").textContent);
  var chart = document.getElementById("chart");
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  var cell = rooflineTables.cell;
  rooflineTables.heading(DATA);

  rooflineTables.summary(document.querySelector("#summary tbody"), DATA.summary);
  rooflineTables.warnings(document.getElementById("warnings"), DATA.warnings);

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
