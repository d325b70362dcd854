// Shared by the serving and training pages: put before each page's own script, so that the page still runs
// one script, named by its hash in the page's policy (roofline.report.page.roofline.assemble).
var rooflineTables = (function () {
  "use strict";

  function cell(tr, tag, value, cls) {
    var el = document.createElement(tag);
    el.textContent = value;
    if (cls) el.className = cls;
    tr.appendChild(el);
    return el;
  }

  // the summary panel: one row [label, value, note] each, the note under the value
  function summary(tbody, rows) {
    rows.forEach(function (row) {
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
      tbody.appendChild(tr);
    });
  }

  function warnings(list, items) {
    items.forEach(function (w) {
      var li = document.createElement("li");
      li.textContent = "warning: " + w;
      list.appendChild(li);
    });
  }

  function heading(data) {
    document.getElementById("title").textContent = data.title;
    document.getElementById("subtitle").textContent = data.subtitle;
  }

  return { cell: cell, summary: summary, warnings: warnings, heading: heading };
})();
