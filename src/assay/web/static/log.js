// The log view's search: marks the lines that hold the text typed (case-insensitive), counts
// them, Enter / Shift+Enter steps through them, "only matching lines" hides the rest. A
// progressive enhancement: without it the page is the whole log, numbered.
(function () {
  "use strict";

  function start() {
    var box = document.getElementById("log-search");
    var log = document.getElementById("log");
    if (!box || !log) return;
    var only = document.getElementById("log-only");
    var count = document.getElementById("log-count");
    var lines = Array.prototype.slice.call(log.children);
    var texts = lines.map(function (li) { return li.lastChild.textContent.toLowerCase(); });
    var total = count.textContent;
    var hits = [];
    var at = -1;
    var timer = null;

    function search() {
      var wanted = box.value.toLowerCase();
      hits = [];
      at = -1;
      lines.forEach(function (li, i) {
        var hit = wanted !== "" && texts[i].indexOf(wanted) !== -1;
        li.classList.toggle("hit", hit);
        li.classList.remove("current");
        li.hidden = only.checked && wanted !== "" && !hit;
        if (hit) hits.push(li);
      });
      count.textContent = wanted === "" ? total :
        hits.length + " matching line" + (hits.length === 1 ? "" : "s");
    }

    function step(back) {
      if (!hits.length) return;
      if (at >= 0) hits[at].classList.remove("current");
      at = (at + (back ? -1 : 1) + hits.length) % hits.length;
      hits[at].classList.add("current");
      hits[at].scrollIntoView({ block: "center" });
      count.textContent = (at + 1) + " of " + hits.length + " matching lines";
    }

    box.addEventListener("input", function () {
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(function () { timer = null; search(); }, 120);
    });
    box.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") return;
      event.preventDefault();
      if (timer !== null) { clearTimeout(timer); timer = null; search(); }
      step(event.shiftKey);
    });
    only.addEventListener("change", search);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
