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
    } else if (event.detail.event.code === 4429) {
      show("too-many-sockets", true);  // the user's other tabs hold every socket allowed
    } else {
      show("connection-lost", true);
    }
  });

  // Whether the page follows new text to the bottom: known from the reader's own scrolling
  // (and the window's size), not measured before each pushed message, which made the browser
  // lay out the whole transcript again for every streamed append.
  var stickToBottom = true;
  function noteScroll() { stickToBottom = nearBottom(); }
  window.addEventListener("scroll", noteScroll, { passive: true });
  window.addEventListener("resize", noteScroll, { passive: true });
  // A pushed message other than streamed text (chat.consumers.append_html: one escaped run of
  // text added to a draft) is announced as "parley:pushed", which the page's other scripts
  // follow (new messages, questions, times, copy buttons). A streamed append changes nothing
  // they look at, and one comes every 50 ms while the agent writes: looking over a long
  // transcript for each took the browser's main thread for tens of milliseconds.
  var APPEND = /^<div hx-swap-oob="beforeend:#draft-\d+">[^<]*<\/div>$/;
  document.addEventListener("htmx:wsAfterMessage", function (event) {
    if (stickToBottom) { scrollToEnd(); }
    if (!APPEND.test(event.detail.message)) {
      document.dispatchEvent(new CustomEvent("parley:pushed"));
    }
  });

  // "Load earlier messages": the page of earlier messages goes in above what the reader sees,
  // which stays where it was on screen, and the focus moves to the next such button (or the
  // first message loaded). Scrolling up to the button loads the page too, once the reader has
  // scrolled the page themselves (not the scroll to the end when it opens).
  var kept = null;  // the first message shown before the page came, and where it was
  var readerScrolled = false;
  ["wheel", "touchmove", "keydown"].forEach(function (name) {
    window.addEventListener(name, function () { readerScrolled = true; }, { passive: true });
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var first = document.querySelector("#transcript > .message");
    if (event.detail.target && event.detail.target.id === "load-earlier" && first) {
      kept = { element: first, top: first.getBoundingClientRect().top };
    }
  });
  function keepInPlace() {
    if (kept) { window.scrollBy(0, kept.element.getBoundingClientRect().top - kept.top); }
  }
  document.addEventListener("htmx:afterSettle", function () {
    // Copy buttons and times are added to the new messages as the swap settles (the other
    // scripts' afterSettle): keep the reader's place once more before the next frame.
    if (kept === null) { return; }
    window.requestAnimationFrame(function () { keepInPlace(); kept = null; });
  });
  document.addEventListener("htmx:afterSwap", function () {
    if (kept === null) { return; }
    keepInPlace();
    var next = document.querySelector("#load-earlier button");
    var first = document.querySelector("#transcript > .message");
    if (next) {
      next.focus({ preventScroll: true });
    } else if (first) {
      first.setAttribute("tabindex", "-1");
      first.focus({ preventScroll: true });
    }
    watchEarlier();
  });
  var earlierSeen = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      var button = entry.target.querySelector("button");
      if (entry.isIntersecting && readerScrolled && button && !button.disabled) { button.click(); }
    });
  }) : null;
  function watchEarlier() {
    var item = byId("load-earlier");
    if (earlierSeen && item) { earlierSeen.observe(item); }
  }
  document.addEventListener("parley:pushed", watchEarlier);  // a newest page pushed whole

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
    if (byId("transcript")) { scrollToEnd(); watchEarlier(); }
    var text = byId("composer-text");
    if (text) { text.focus(); }
    // The language switcher applies as soon as a language is picked.
    var select = byId("language-select");
    if (select) {
      select.addEventListener("change", function () { select.form.requestSubmit(); });
    }
  });
})();

/* Refusals and network failures are shown where the user acted: the server retargets its
   refusal into the form's alert (django-htmx); a request that never got an answer, or got a
   server error, is said here (a 503 while Redis is down sends its message as text). */
(function () {
  "use strict";

  function alertOf(element) {
    var form = element && element.closest && element.closest("[data-alert]");
    return form ? document.getElementById(form.getAttribute("data-alert")) : null;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var alert = alertOf(event.target);
    if (alert) { alert.textContent = ""; }
  });

  // A form that got no answer, or a server error, is offered again as it was: "Retry" sends
  // it once more (the composer keeps its text; nothing was swapped).
  function sayFailed(event, text) {
    var alert = alertOf(event.target);
    if (!alert) { return; }
    alert.textContent = text + " ";
    var form = event.target.closest("form");
    if (!form) { return; }
    var retry = document.createElement("button");
    retry.type = "button";
    retry.className = "alert-retry";
    retry.textContent = document.body.getAttribute("data-retry");
    retry.addEventListener("click", function () { form.requestSubmit(); });
    alert.appendChild(retry);
  }

  document.addEventListener("htmx:sendError", function (event) {
    sayFailed(event, document.body.getAttribute("data-network-error"));
  });

  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var text = /^text\/plain/.test(xhr.getResponseHeader("Content-Type") || "") ? xhr.responseText : "";
    sayFailed(event, text || document.body.getAttribute("data-server-error"));
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

  // Focus moves into a question when it appears: the box of a free-form question, else the
  // default (or first) option; never the box when there are options to pick.
  function focusQuestion(block) {
    var list = options(block);
    var target = list.length ? (block.querySelector("[data-default]") || list[0]) : block.querySelector(".custom-input");
    if (target) { target.focus(); }
  }

  function pendingQuestions() {
    return Array.prototype.slice.call(document.querySelectorAll(".question-pending"));
  }

  // Typing never answers a question: a question that arrives while the person is typing
  // (a text field other than the question's own has text, or was edited in the last second)
  // does not take the focus, so the next keystrokes do not answer it. It is announced instead
  // (a status for screen readers), with an "Answer ↑" button and Alt+Up to go to it.
  var edited = { field: null, at: 0 };
  function isTextField(el) {
    return !!el && (el.tagName === "TEXTAREA" || el.isContentEditable ||
      (el.tagName === "INPUT" && /^(text|search|email|url|tel|password|number)$/.test(el.type)));
  }
  document.addEventListener("input", function (event) {
    if (isTextField(event.target)) { edited = { field: event.target, at: Date.now() }; }
  });
  function typing() {
    var el = document.activeElement;
    if (!isTextField(el) || el.closest(".question-pending")) { return false; }
    return el.value !== "" || (edited.field === el && Date.now() - edited.at < 1000);
  }

  var waitingId = null;  // the question that arrived while the person was typing
  function setWaiting(id) {
    waitingId = id;
    var status = document.getElementById("question-waiting-status");
    var jump = document.getElementById("question-jump");
    if (status) { status.textContent = id ? status.getAttribute("data-text") : ""; }
    if (jump) { jump.hidden = !id; }
  }
  function goToWaiting() {
    var block = waitingId && document.getElementById(waitingId);
    setWaiting(null);
    if (block && block.classList.contains("question-pending")) {
      block.scrollIntoView({ block: "center" });
      focusQuestion(block);
    }
  }

  var known = {};
  function noticeNewQuestions() {
    pendingQuestions().forEach(function (block) {
      if (!known[block.id]) {
        known[block.id] = true;
        if (typing()) { setWaiting(block.id); } else { focusQuestion(block); }
      }
    });
    var waiting = waitingId && document.getElementById(waitingId);
    if (waitingId && !(waiting && waiting.classList.contains("question-pending"))) { setWaiting(null); }
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("#question-jump")) { goToWaiting(); }
  });
  // The button lives in the composer, which a send swaps for a new one.
  document.addEventListener("htmx:afterSettle", function () { setWaiting(waitingId); });
  document.addEventListener("keydown", function (event) {
    if (waitingId && event.altKey && event.key === "ArrowUp" && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      goToWaiting();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var blocks = pendingQuestions();
    blocks.forEach(function (block) { known[block.id] = true; });
    if (blocks.length) { focusQuestion(blocks[blocks.length - 1]); }
  });
  document.addEventListener("parley:pushed", noticeNewQuestions);

  // "Other…" shows the typed-answer box (and, for one choice, its Submit); hidden again, the
  // box keeps its text but is not sent.
  function showOther(control, open) {
    var box = document.getElementById(control.getAttribute("data-other"));
    if (!box) { return; }
    box.hidden = !open;
    var input = box.querySelector(".custom-input");
    input.disabled = !open;
    if (control.tagName === "BUTTON") {
      control.setAttribute("aria-expanded", open ? "true" : "false");
      var submit = control.closest("form").querySelector(".question-submit");
      if (submit) { submit.hidden = !open; }
    }
    if (open) { input.focus(); }
  }

  // "Edit arguments" opens the approval's Arguments box (only then is it sent with Allow).
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("button[data-edit-arguments]");
    if (!toggle) { return; }
    var box = document.getElementById(toggle.getAttribute("data-edit-arguments"));
    if (!box) { return; }
    var open = toggle.getAttribute("aria-expanded") !== "true";
    box.hidden = !open;
    var editor = box.querySelector("textarea");
    editor.disabled = !open;
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) { editor.focus(); }
  });

  // A tool's link opens in a new tab only once the person agrees ("Open link"), from the
  // click itself so that no popup blocker stops it; the form then tells the tool.
  document.addEventListener("click", function (event) {
    var open = event.target.closest && event.target.closest(".question-pending button[data-open-url]");
    var url = open && open.getAttribute("data-open-url");
    if (url && /^https?:\/\//i.test(url)) { window.open(url, "_blank", "noopener,noreferrer"); }
  });

  document.addEventListener("click", function (event) {
    var other = event.target.closest && event.target.closest(".question-pending button[data-other]");
    if (other) { showOther(other, other.getAttribute("aria-expanded") !== "true"); }
  });

  document.addEventListener("change", function (event) {
    var input = event.target;
    if (!input.closest || !input.closest(".question-pending")) { return; }
    if (input.hasAttribute("data-other")) {
      showOther(input, input.checked);
    } else if (input.type === "radio") {
      var item = input.closest(".question-item");
      var other = item && item.querySelector("input[type=radio][data-other]");
      if (other) { showOther(other, false); }
    }
  });

  document.addEventListener("keydown", function (event) {
    var block = event.target.closest && event.target.closest(".question-pending");
    if (!block) { return; }
    var form = block.querySelector("form");
    var inAnswerBox = event.target.classList.contains("custom-input");
    if (event.key === "Escape") {
      event.preventDefault();
      var composer = document.getElementById("composer-text");
      if (composer) { composer.focus(); }
      return;
    }
    if (event.key === "Enter" && !event.isComposing && inAnswerBox && !event.shiftKey && !event.altKey) {
      // Enter in the typed-answer box submits the typed answer (not the first option).
      event.preventDefault();
      var submitTyped = block.querySelector(".question-submit");
      if (form && submitTyped && !submitTyped.disabled) { form.requestSubmit(submitTyped); }
      return;
    }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      var submit = block.querySelector(".question-submit");
      if (form && submit && !submit.disabled && !submit.hidden) { form.requestSubmit(submit); }
      return;
    }
    var list = options(block);
    // Number keys pick (or toggle) the nth option of the question the focus is in; never
    // of a confirmation, which takes Enter or a click on the button itself.
    if (block.classList.contains("question-confirm") && /^[1-9]$/.test(event.key)) { return; }
    if (!inAnswerBox && /^[1-9]$/.test(event.key) && !event.ctrlKey && !event.metaKey && !event.altKey) {
      var item = event.target.closest(".question-item") || block;
      var own = options(item).length ? options(item) : list;
      var chosen = own[Number(event.key) - 1];
      if (chosen) {
        event.preventDefault();
        chosen.focus();
        chosen.click();
      }
      return;
    }
    if (["ArrowDown", "ArrowUp", "ArrowLeft", "ArrowRight", "Home", "End"].indexOf(event.key) < 0) { return; }
    if (inAnswerBox) { return; }  // the caret moves there
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
