// artifactd UI: progressive enhancement only (every page works without it).
// Zoom buttons for the graph picture, copy buttons for text areas, and the
// time-travel slider: its step number follows the thumb, and releasing it
// (or a key) shows that step, as its "Show step" button does.
// It never reads or inserts page text as HTML.
"use strict";
(function () {
  function setupZoom() {
    var view = document.getElementById("graph");
    var bar = document.querySelector(".graph-toolbar");
    if (!view || !bar) return;
    var svg = view.querySelector("svg.provenance");
    if (!svg) return;
    var vb = svg.viewBox && svg.viewBox.baseVal;
    if (!vb || !vb.width) return;
    var natural = vb.width * 4 / 3; // Graphviz sizes in points: 1pt = 4/3 px
    var scale = 1;
    function apply() {
      view.classList.add("zoomed");
      svg.setAttribute("width", String(Math.round(natural * scale)));
      svg.setAttribute("height", String(Math.round(vb.height * 4 / 3 * scale)));
    }
    bar.hidden = false;
    bar.addEventListener("click", function (ev) {
      var b = ev.target.closest("button[data-zoom]");
      if (!b) return;
      var what = b.getAttribute("data-zoom");
      if (what === "in") scale = Math.min(scale * 1.25, 8);
      else if (what === "out") scale = Math.max(scale / 1.25, 0.05);
      else if (what === "reset") scale = 1;
      else if (what === "fit") scale = Math.min(1, (view.clientWidth - 16) / natural);
      apply();
    });
  }
  function setupCopy() {
    var buttons = document.querySelectorAll("button.copy[data-copy]");
    Array.prototype.forEach.call(buttons, function (b) {
      var area = document.getElementById(b.getAttribute("data-copy"));
      if (!area || !navigator.clipboard) return;
      b.hidden = false;
      b.addEventListener("click", function () {
        navigator.clipboard.writeText(area.value).then(function () {
          b.textContent = "Copied";
        }, function () {
          area.select();
        });
      });
    });
  }
  function setupTravel() {
    var range = document.getElementById("step");
    var out = document.getElementById("step-out");
    if (!range || !out || !range.form) return;
    range.addEventListener("input", function () {
      out.textContent = range.value;
      range.setAttribute("aria-valuetext", "step " + range.value + " of " + range.max);
    });
    range.addEventListener("change", function () {
      if (range.form.requestSubmit) range.form.requestSubmit();
      else range.form.submit();
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    setupZoom();
    setupCopy();
    setupTravel();
  });
})();
