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
    } else if (event.detail.event.code === 4401) {
      window.location.reload();  // signed out: the page sends them to the login form
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

/* Questions: keyboard-first answering. */
(function () {
  "use strict";

  function options(block) {
    return Array.prototype.slice.call(
      block.querySelectorAll(".option-button, .option input[type=checkbox], .option input[type=radio]")
    );
  }

  // Focus moves into a question when it appears: its typed-answer box if any, else its
  // default (or first) option.
  function focusQuestion(block) {
    var target = block.querySelector(".custom-input") ||
      block.querySelector("[data-default]") ||
      options(block)[0];
    if (target) { target.focus(); }
  }

  function pendingQuestions() {
    return Array.prototype.slice.call(document.querySelectorAll(".question-pending"));
  }

  var known = {};
  function noticeNewQuestions() {
    pendingQuestions().forEach(function (block) {
      if (!known[block.id]) {
        known[block.id] = true;
        focusQuestion(block);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var blocks = pendingQuestions();
    blocks.forEach(function (block) { known[block.id] = true; });
    if (blocks.length) { focusQuestion(blocks[blocks.length - 1]); }
  });
  document.addEventListener("htmx:wsAfterMessage", noticeNewQuestions);

  // Clicking an option answers with that option alone, whatever was typed in the box.
  document.addEventListener("click", function (event) {
    var option = event.target.closest && event.target.closest(".question-pending .option-button");
    if (!option) { return; }
    option.closest(".question-item").querySelectorAll(".custom-input").forEach(function (input) {
      input.value = "";
    });
  }, true);

  document.addEventListener("keydown", function (event) {
    var block = event.target.closest && event.target.closest(".question-pending");
    if (!block) { return; }
    var form = block.querySelector("form");
    if (event.key === "Escape") {
      event.preventDefault();
      var composer = document.getElementById("composer-text");
      if (composer) { composer.focus(); }
      return;
    }
    if (event.key === "Enter" && !event.isComposing && event.target.classList.contains("custom-input") &&
        !event.shiftKey && !event.altKey) {
      // Enter in the typed-answer box submits the typed answer (not the first option).
      event.preventDefault();
      var submitTyped = block.querySelector(".question-submit");
      if (form && submitTyped && !submitTyped.disabled) { form.requestSubmit(submitTyped); }
      return;
    }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      var submit = block.querySelector(".question-submit");
      if (form && submit && !submit.disabled) { form.requestSubmit(submit); }
      return;
    }
    if (["ArrowDown", "ArrowUp", "ArrowLeft", "ArrowRight", "Home", "End"].indexOf(event.key) < 0) { return; }
    if (event.target.classList.contains("custom-input")) { return; }  // the caret moves there
    var list = options(block);
    var index = list.indexOf(event.target);
    if (index < 0) { return; }
    event.preventDefault();
    var next = index;
    if (event.key === "ArrowDown" || event.key === "ArrowRight") { next = Math.min(index + 1, list.length - 1); }
    if (event.key === "ArrowUp" || event.key === "ArrowLeft") { next = Math.max(index - 1, 0); }
    if (event.key === "Home") { next = 0; }
    if (event.key === "End") { next = list.length - 1; }
    list[next].focus();
  });
})();
