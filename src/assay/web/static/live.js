// Live refresh for the dashboard's pages (a progressive enhancement: every page is complete
// without it, and a reload shows the same).
//
// The page's <body> says which events matter (data-live-after: the last event id the page was
// built from; data-live-run / data-live-task: only this run's or task's), and each element with
// data-live-fragment="<url>" is re-fetched from that url when such an event comes (debounced),
// its innerHTML swapped. One EventSource per page; it resumes by Last-Event-ID on reconnect.
(function () {
  "use strict";

  var DEBOUNCE_MS = 200;
  var POLL_MS = 3000;

  function start() {
    var body = document.body;
    var targets = document.querySelectorAll("[data-live-fragment]");
    if (!window.EventSource || !body || body.dataset.liveAfter === undefined || !targets.length) {
      return;
    }
    var status = document.getElementById("live-status");
    var params = new URLSearchParams({ after: body.dataset.liveAfter, plain: "1" });
    if (body.dataset.liveRun) params.set("run_id", body.dataset.liveRun);
    if (body.dataset.liveTask) params.set("task_id", body.dataset.liveTask);

    var source = new EventSource("/events?" + params.toString());
    var timer = null;
    var fetching = false;
    var again = false;

    function say(state, title) {
      if (!status) return;
      status.className = "live-status live-" + state;
      status.title = title;
      status.textContent = state === "on" ? "● live" : state === "off" ? "○ offline" : "";
    }

    function refresh() {
      if (fetching) { again = true; return; }  // one fetch at a time; one more after it
      fetching = true;
      var pending = Array.prototype.map.call(targets, function (el) {
        return fetch(el.dataset.liveFragment, { credentials: "same-origin", cache: "no-store" })
          .then(function (response) {
            if (!response.ok) throw new Error("HTTP " + response.status);
            return response.text();
          })
          .then(function (html) {
            if (keepsFocus(el)) return;  // never wipe a form the operator is typing into
            el.innerHTML = html;
            var needsYou = el.querySelector("[data-needs-you]");
            var badge = document.getElementById("needs-you-count");
            if (needsYou && badge) {
              badge.textContent = needsYou.dataset.needsYou;
              badge.parentNode.classList.toggle("some", needsYou.dataset.needsYou !== "0");
            }
            el.dispatchEvent(new CustomEvent("live:updated", { bubbles: true }));
          });
      });
      Promise.all(pending)
        .then(function () { say("on", "live: updated " + new Date().toLocaleTimeString()); })
        .catch(function (err) { say("off", "live: could not refresh (" + err.message + ")"); })
        .then(function () {
          fetching = false;
          if (again) { again = false; schedule(); }
        });
    }

    function keepsFocus(el) {
      var active = document.activeElement;
      return active && el.contains(active) &&
        (active.tagName === "INPUT" || active.tagName === "TEXTAREA") && active.value !== "";
    }

    function schedule() {
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(function () { timer = null; refresh(); }, DEBOUNCE_MS);
    }

    source.onopen = function () { say("on", "live: connected"); };
    source.onerror = function () { say("off", "live: reconnecting"); };
    source.onmessage = schedule;  // plain=1: every kind arrives as a "message"
    // A running coder's log reaches the ledger without an event (it is shipped, not
    // journaled): while the page shows one (data-live-poll), it is refreshed every few seconds.
    setInterval(function () {
      if (!document.hidden && document.querySelector("[data-live-poll]")) schedule();
    }, POLL_MS);
    window.addEventListener("beforeunload", function () { source.close(); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
