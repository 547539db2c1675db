// Keeps the dashboard's times moving (a progressive enhancement: without it each shows the
// server's figure from when the page was built). Every second, each <time datetime> reads
// again as the server writes a relative time ("just now", "3 min ago"), and each element with
// data-since (a running seat, a running run) shows its elapsed time ("1 m 03 s"). The
// server's clock is the reference (data-now on this script), so a browser whose clock is off
// still counts from when the server says a thing started. Elements a live refresh swaps in
// are found on the next tick.
(function () {
  "use strict";

  var script = document.currentScript;
  var serverNow = script && Date.parse(script.dataset.now || "");
  var offset = isNaN(serverNow) || !serverNow ? 0 : serverNow - Date.now();

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // format.duration: "450 ms", "4.2 s", "42 s", "1 m 03 s", "2 h 05 m".
  function duration(ms) {
    if (ms < 1000) return ms + " ms";
    if (ms < 10000) return (ms / 1000).toFixed(1) + " s";
    var seconds = Math.floor(ms / 1000);
    if (seconds < 60) return seconds + " s";
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + " m " + pad(seconds % 60) + " s";
    return Math.floor(minutes / 60) + " h " + pad(minutes % 60) + " m";
  }

  // format._span and format.ago.
  function span(seconds) {
    if (seconds < 60) return seconds + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min";
    if (seconds < 86400) {
      var hours = Math.floor(seconds / 3600), rest = seconds % 3600;
      return hours < 6 && rest >= 60 ? hours + " h " + Math.floor(rest / 60) + " min" : hours + " h";
    }
    var days = Math.floor(seconds / 86400), left = seconds % 86400;
    return days < 3 && left >= 3600 ? days + " d " + Math.floor(left / 3600) + " h" : days + " d";
  }

  function ago(at, now) {
    var delta = Math.trunc((at - now) / 1000);
    if (Math.abs(delta) < 5) return "just now";
    return delta > 0 ? "in " + span(delta) : span(-delta) + " ago";
  }

  function tick() {
    var now = Date.now() + offset;
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (!isNaN(since)) el.textContent = duration(Math.max(0, now - since));
    });
    document.querySelectorAll("time[datetime]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      var text = ago(at, now);
      if (el.textContent !== text) el.textContent = text;
    });
  }

  function start() {
    tick();
    setInterval(tick, 1000);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
