// Live refresh for the dashboard's pages (a progressive enhancement: every page is complete
// without it, and a reload shows the same).
//
// The page's <body> says which events matter (data-live-after: the last event id the page was
// built from; data-live-run / data-live-task: only this run's or task's), and each element with
// data-live-fragment="<url>" is re-fetched from that url when such an event comes (debounced),
// its innerHTML swapped. One EventSource per page; it resumes by Last-Event-ID on reconnect.
//
// The navigation's "needs you" badge counts every task, so any task's event may change it: a
// page with the badge takes every event (its fragments still refresh only for their run's or
// task's) and re-reads the count from /fragments/needs-you once per burst, unless a fragment
// of the page carries the count already (data-needs-you: the queue's).
(function () {
  "use strict";

  var DEBOUNCE_MS = 200;
  var POLL_MS = 3000;

  // ``work`` (returning a promise) once per burst of calls: debounced, one at a time, and
  // once more after it when called meanwhile.
  function burst(work) {
    var timer = null, running = false, again = false;
    function schedule() {
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(run, DEBOUNCE_MS);
    }
    function run() {
      timer = null;
      if (running) { again = true; return; }
      running = true;
      work().then(function () {
        running = false;
        if (again) { again = false; schedule(); }
      });
    }
    return schedule;
  }

  function showNeedsYou(count) {
    var badge = document.getElementById("needs-you-count");
    if (!badge || !/^[0-9]+$/.test(count)) return;
    badge.textContent = count;
    badge.parentNode.classList.toggle("some", count !== "0");
  }

  function start() {
    var body = document.body;
    var live = body && body.dataset.liveAfter !== undefined;
    var targets = live ? document.querySelectorAll("[data-live-fragment]") : [];
    var badge = document.getElementById("needs-you-count");
    var counted = document.querySelector("[data-live-fragment] [data-needs-you]") !== null;
    var countApart = badge !== null && !counted;
    if (!window.EventSource || !body || (!targets.length && !countApart)) return;
    var status = document.getElementById("live-status");
    var runId = body.dataset.liveRun, taskId = body.dataset.liveTask;
    var params = new URLSearchParams({ plain: "1" });
    if (live) params.set("after", body.dataset.liveAfter);  // else: from now on
    if (!countApart) {  // only this page's events matter: the server leaves the others out
      if (runId) params.set("run_id", runId);
      if (taskId) params.set("task_id", taskId);
    }

    var source = new EventSource("/events?" + params.toString());

    function say(state, title) {
      if (!status) return;
      status.className = "live-status live-" + state;
      status.title = title;
      status.textContent = state === "on" ? "● live" : state === "off" ? "○ offline" : "";
    }

    function refresh() {
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
            if (needsYou) showNeedsYou(needsYou.dataset.needsYou);
            el.dispatchEvent(new CustomEvent("live:updated", { bubbles: true }));
          });
      });
      return Promise.all(pending)
        .then(function () { say("on", "live: updated " + new Date().toLocaleTimeString()); })
        .catch(function (err) { say("off", "live: could not refresh (" + err.message + ")"); });
    }

    function recount() {
      return fetch("/fragments/needs-you", { credentials: "same-origin", cache: "no-store" })
        .then(function (response) { return response.ok ? response.text() : ""; })
        .then(function (text) { showNeedsYou(text.trim()); })
        .catch(function () {});  // the badge keeps its last count; the next event tries again
    }

    function mine(data) {
      if (!countApart) return true;  // the server sent only this page's events
      try {
        var event = JSON.parse(data);
        return (!runId || event.run_id === runId) && (!taskId || event.task_id === taskId);
      } catch (err) {
        return true;
      }
    }

    function keepsFocus(el) {
      var active = document.activeElement;
      return active && el.contains(active) &&
        (active.tagName === "INPUT" || active.tagName === "TEXTAREA") && active.value !== "";
    }

    var scheduleRefresh = burst(refresh);
    var scheduleRecount = burst(recount);

    source.onopen = function () { say("on", "live: connected"); };
    source.onerror = function () { say("off", "live: reconnecting"); };
    source.onmessage = function (message) {  // plain=1: every kind arrives as a "message"
      if (targets.length && mine(message.data)) scheduleRefresh();
      if (countApart) scheduleRecount();
    };
    // A running coder's log reaches the ledger without an event (it is shipped, not
    // journaled): while the page shows one (data-live-poll), it is refreshed every few seconds.
    setInterval(function () {
      if (!document.hidden && document.querySelector("[data-live-poll]")) scheduleRefresh();
    }, POLL_MS);
    window.addEventListener("beforeunload", function () { source.close(); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
