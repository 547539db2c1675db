// The log view's search: marks the lines that hold the text typed (case-insensitive), counts
// them, Enter / Shift+Enter steps through them, "only matching lines" hides the rest. And,
// while the log's run is open (data-follow on the list), its tail is followed: every couple of
// seconds the page asks what changed since what it shows (its length and signature) and gets
// the lines to replace from a line on (only the new ones when the log grew, the whole log when
// its kept copy was replaced), scrolled along when the reader was at the bottom. A progressive
// enhancement: without it the page is the whole log, numbered, as it was when it loaded.
(function () {
  "use strict";

  function start() {
    var box = document.getElementById("log-search");
    var log = document.getElementById("log");
    if (!box || !log) return;
    var only = document.getElementById("log-only");
    var count = document.getElementById("log-count");
    var lines = [];
    var texts = [];
    var total = count.textContent;

    function reread() {
      lines = Array.prototype.slice.call(log.children);
      texts = lines.map(function (li) { return li.lastChild.textContent.toLowerCase(); });
      total = lines.length + " line" + (lines.length === 1 ? "" : "s");
    }
    reread();
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
    if (log.dataset.follow) follow(log, function () { reread(); search(); });
  }

  var FOLLOW_MS = 2000;

  function line(number, html) {
    var li = document.createElement("li");
    li.id = "L" + number;
    var a = document.createElement("a");
    a.className = "ln";
    a.href = "#L" + number;
    a.setAttribute("aria-hidden", "true");
    a.tabIndex = -1;
    a.textContent = String(number);
    var text = document.createElement("span");
    text.className = "lt";
    text.innerHTML = html;  // the server's escaped rendering of the line (ansi.html_lines)
    li.appendChild(a);
    li.appendChild(text);
    return li;
  }

  function follow(log, changed) {
    var state = document.getElementById("log-follow-state");
    var timer = null;

    function poll() {
      var params = new URLSearchParams({ length: log.dataset.length, sig: log.dataset.sig });
      fetch(log.dataset.follow + "?" + params.toString(), { credentials: "same-origin", cache: "no-store" })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (update) {
          var bottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
          if (update.lines.length || update.total !== log.children.length) {
            while (log.children.length > update.start) log.removeChild(log.lastChild);
            var batch = document.createDocumentFragment();
            update.lines.forEach(function (html, i) { batch.appendChild(line(update.start + i + 1, html)); });
            log.appendChild(batch);
            changed();
            if (bottom) window.scrollTo(0, document.body.scrollHeight);
          }
          var size = document.getElementById("log-size");
          var kept = document.querySelector("#log-kept time");
          if (size && update.size) size.textContent = update.size;
          if (kept && update.kept) kept.setAttribute("datetime", update.kept);  // clock.js ticks it
          log.dataset.length = update.length;
          log.dataset.sig = update.sig;
          if (!update.live) {
            if (state) state.textContent = update.note || "the run has ended: this is the log as kept";
            return;
          }
          if (state) state.textContent = "following: checked " + new Date().toLocaleTimeString();
          timer = setTimeout(poll, FOLLOW_MS);
        })
        .catch(function (err) {
          if (state) state.textContent = "not following (" + err.message + "); retrying";
          timer = setTimeout(poll, FOLLOW_MS * 5);
        });
    }
    timer = setTimeout(poll, FOLLOW_MS);
    window.addEventListener("beforeunload", function () { if (timer !== null) clearTimeout(timer); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
