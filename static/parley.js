/* Parley's page behaviour: websocket catch-up, the composer's keys, small niceties.
   Loaded as a file (the CSP allows no inline script). */
(function () {
  "use strict";

  function byId(id) { return document.getElementById(id); }

  function show(id, visible) {
    var el = byId(id);
    if (el) { el.hidden = !visible; }
  }

  function nearBottom() {
    var doc = document.scrollingElement || document.documentElement;
    return doc.scrollHeight - doc.scrollTop - doc.clientHeight < 160;
  }

  function scrollToEnd() {
    var doc = document.scrollingElement || document.documentElement;
    doc.scrollTop = doc.scrollHeight;
  }

  // Every time the socket opens (first time and after each reconnect) tell the server the last
  // change this page has; it answers with everything after it, so nothing is missed or doubled.
  document.addEventListener("htmx:wsOpen", function (event) {
    var cursor = byId("sync-cursor");
    event.detail.socketWrapper.send(JSON.stringify({ type: "sync", after: cursor ? Number(cursor.value) : 0 }));
    show("connection-lost", false);
  });

  document.addEventListener("htmx:wsClose", function (event) {
    if (event.detail.event.code === 4404) {
      show("conversation-gone", true);
    } else {
      show("connection-lost", true);
    }
  });

  var stickToBottom = true;
  document.addEventListener("htmx:wsBeforeMessage", function () { stickToBottom = nearBottom(); });
  document.addEventListener("htmx:wsAfterMessage", function () { if (stickToBottom) { scrollToEnd(); } });

  // Composer: Enter sends, Shift+Enter adds a line (IME composition is left alone).
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (target.id !== "composer-text" || event.key !== "Enter") { return; }
    if (event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) { return; }
    event.preventDefault();
    if (target.form && !target.form.querySelector("button[disabled]")) { target.form.requestSubmit(); }
  });

  // After the composer is swapped (sent, or refused with an error), keep typing in it.
  document.addEventListener("htmx:afterSettle", function () {
    var text = byId("composer-text");
    if (text && (!document.activeElement || document.activeElement === document.body)) { text.focus(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (byId("transcript")) { scrollToEnd(); }
    var text = byId("composer-text");
    if (text) { text.focus(); }
    // The language switcher applies as soon as a language is picked.
    var select = byId("language-select");
    if (select) {
      select.addEventListener("change", function () { select.form.requestSubmit(); });
    }
  });
})();
