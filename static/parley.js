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

  // The conversation's socket, as the page shows it beside the composer. Down: the status
  // (#connection-status, a live region) says so, and the conversation is marked
  // data-connection="lost" (static/parley.css hides the agent's status, which may be stale;
  // static/parley-ui.js offers Send, whose failure says why the message was not sent).
  // Closed for good: data-closed names why, and its notice takes the composer's place.
  function setConnectionLost(lost) {
    var live = byId("conversation-live");
    var status = byId("connection-status");
    if (!live || live.hasAttribute("data-closed")) { return; }
    if (lost) { live.setAttribute("data-connection", "lost"); } else { live.removeAttribute("data-connection"); }
    if (status) { status.textContent = lost ? status.getAttribute("data-lost") : ""; }
    document.dispatchEvent(new CustomEvent("parley:connection"));
  }

  function closeConversation(reason, notice) {
    var live = byId("conversation-live");
    var transcript = byId("transcript");
    setConnectionLost(false);
    if (live) { live.setAttribute("data-closed", reason); }
    if (transcript) { transcript.inert = true; }
    show(notice, true);
  }

  // Every time the socket opens (first time and after each reconnect) tell the server the last
  // change this page has; it answers with everything after it, so nothing is missed or doubled.
  // After a reconnect ("again") it also renders the waiting cards again: what they show outside
  // the transcript (whom a question waits for) may have changed while the socket was down.
  document.addEventListener("htmx:wsOpen", function (event) {
    var cursor = byId("sync-cursor");
    var sync = { type: "sync", after: cursor ? Number(cursor.value) : 0 };
    if (event.target.hasAttribute("data-synced")) { sync.again = true; }
    event.target.setAttribute("data-synced", "");
    event.detail.socketWrapper.send(JSON.stringify(sync));
    if (event.target.id === "conversation-live") { setConnectionLost(false); }
  });

  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event.code;
    if (code === 4409 || code === 4401) {
      window.location.reload();  // another role, or signed out: the page as it now is
    } else if (code === 4429) {
      show("too-many-sockets", true);  // the user's other tabs hold every socket allowed
    } else if (event.target.id !== "conversation-live") {
      return;  // the user's live channel (/ws/me/) says nothing of this conversation
    } else if (code === 4404) {
      closeConversation("gone", "conversation-gone");
    } else if (code === 4403) {
      closeConversation("unshared", "conversation-unshared");  // its owner no longer shares it with this user
    } else {
      setConnectionLost(true);
    }
  });

  // Whether the page follows new text to the bottom: known from the reader's own scrolling
  // (and the window's size), not measured before each pushed message, which made the browser
  // lay out the whole transcript again for every streamed append.
  var stickToBottom = true;
  function noteScroll() { stickToBottom = nearBottom(); }
  window.addEventListener("scroll", noteScroll, { passive: true });
  window.addEventListener("resize", noteScroll, { passive: true });
  // A pushed message other than streamed text (chat.live.consumers.append_html: one escaped
  // run of text added to a draft) is announced as "parley:pushed", which the page's other
  // scripts follow (new messages, questions, times, copy buttons). A streamed append changes nothing
  // they look at, and one comes every 50 ms while the agent writes: looking over a long
  // transcript for each took the browser's main thread for tens of milliseconds.
  var APPEND = /^<div hx-swap-oob="beforeend:#draft-\d+">[^<]*<\/div>$/;
  document.addEventListener("htmx:wsAfterMessage", function (event) {
    // Only the transcript's own socket moves the page: the live channel (/ws/me/) pushes to
    // every page, and a list or the inbox stays where its reader is (at its top, first).
    if (stickToBottom && event.target.id === "conversation-live") { scrollToEnd(); }
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

  // A touch screen (a coarse pointer) has no Shift+Enter to speak of: there Enter adds a line
  // and the Send button sends, and no page focuses the composer on load (which would open the
  // keyboard over the page). The hint under the composer follows the same media query.
  var touch = window.matchMedia && window.matchMedia("(pointer: coarse)");

  // Composer: Enter sends, Shift+Enter adds a line (IME composition is left alone).
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (target.id !== "composer-text" || event.key !== "Enter") { return; }
    if (touch && touch.matches) { return; }
    if (event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) { return; }
    event.preventDefault();
    if (target.form && !target.form.querySelector("button[disabled]")) { target.form.requestSubmit(); }
  });

  // Near the longest message that may be sent, the composer counts what is left; over it,
  // by how much, before anything is sent (the server refuses it all the same). Characters are
  // counted as the server counts them: code points, not UTF-16 units.
  var LEFT_FROM = 0.9;
  function count(number) { return number.toLocaleString(document.documentElement.lang || undefined); }
  function sayLength(text) {
    var out = byId("composer-count");
    var max = parseInt(text.getAttribute("data-max-chars"), 10);
    if (!out || !max) { return; }
    var length = Array.from(text.value).length;
    var over = length > max;
    var said = "";
    if (over) {
      said = text.getAttribute("data-over").replace("%(count)s", count(length - max)).replace("%(limit)s", count(max));
    } else if (length >= max * LEFT_FROM) {
      said = text.getAttribute("data-left").replace("%(count)s", count(max - length));
    }
    if (out.textContent !== said) { out.textContent = said; }
    out.classList.toggle("is-over", over);
    if (over) { text.setAttribute("aria-invalid", "true"); } else if (!byId("composer-error") || !byId("composer-error").textContent) { text.removeAttribute("aria-invalid"); }
  }
  document.addEventListener("input", function (event) {
    if (event.target.id === "composer-text") { sayLength(event.target); }
  });

  // A new conversation's first message makes it, and the page then moves to its address
  // (HX-Redirect): what the person typed while that message was on its way goes with them,
  // the caret where it was. Kept for the one page it moves to (sessionStorage, this tab).
  var CARRY = "parley:composer-carry";
  var sending = null;  // the text the composer's request in flight sends
  document.addEventListener("htmx:beforeRequest", function (event) {
    var text = byId("composer-text");
    if (text && event.target.id === "composer") { sending = text.value; }
  });
  document.addEventListener("htmx:beforeOnLoad", function (event) {
    var to = event.detail.xhr.getResponseHeader("HX-Redirect");
    if (event.target.id !== "composer" || !to) { return; }
    var path = new URL(to, location.href).pathname;
    function carry() {
      var text = byId("composer-text");
      if (!text || sending === null || text.value.indexOf(sending) !== 0) { return; }
      var typed = text.value.slice(sending.length);
      if (!typed) { sessionStorage.removeItem(CARRY); return; }
      var caret = Math.max(0, text.selectionStart - sending.length);
      sessionStorage.setItem(CARRY, JSON.stringify({ path: path, text: typed, caret: caret }));
    }
    carry();
    window.addEventListener("pagehide", carry);
  });
  function takeCarried(text) {
    var kept = null;
    try { kept = JSON.parse(sessionStorage.getItem(CARRY) || "null"); } catch (error) { kept = null; }
    sessionStorage.removeItem(CARRY);
    if (!kept || kept.path !== location.pathname || typeof kept.text !== "string") { return; }
    text.value = kept.text + text.value;
    var caret = Math.min(Number(kept.caret) || 0, kept.text.length);
    text.focus();
    text.setSelectionRange(caret, caret);
  }

  // A plain form that creates something (a suggestion sent from a blank conversation) is
  // sent once: a second click while the next page loads would create it twice.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute("data-submit-once")) { return; }
    if (form.hasAttribute("data-sent")) { event.preventDefault(); return; }
    form.setAttribute("data-sent", "");
  });
  window.addEventListener("pageshow", function () {
    Array.prototype.forEach.call(document.querySelectorAll("form[data-sent]"), function (form) {
      form.removeAttribute("data-sent");
    });
  });

  // Focus never falls on <body>. When the control that had it is swapped away, hidden or
  // disabled (the composer swapped after a send, Stop once the reply stops, Save and send
  // once the edit is taken, a question answered in another tab), it goes back to that
  // control if it is still there to use, else to the composer. Focus the person moved away
  // themselves (a click on the page's text) is left where they put it.
  var lastFocused = null;
  var clickedAway = false;
  document.addEventListener("focusin", function (event) {
    lastFocused = event.target;
    clickedAway = false;
  });
  document.addEventListener("pointerdown", function (event) {
    var target = event.target;
    clickedAway = !(target.closest && target.closest("a[href], button, input, textarea, select, summary, label, [tabindex]"));
  });
  function usable(el) {
    return !!el && el.isConnected && !el.disabled && el.getClientRects().length > 0;
  }
  function rescueFocus() {
    var active = document.activeElement;
    // Nothing had the focus yet on this page (a touch screen focuses nothing on load): a push
    // does not open the keyboard.
    if (!lastFocused || (active && active !== document.body) || clickedAway) { return; }
    if (usable(lastFocused)) { lastFocused.focus({ preventScroll: true }); return; }
    var text = byId("composer-text");
    if (usable(text)) { text.focus(); }
  }
  document.addEventListener("htmx:afterSettle", function () {
    rescueFocus();
    var text = byId("composer-text");
    if (text) { sayLength(text); }
  });
  // A request's buttons are enabled again only after its afterRequest handlers have run.
  document.addEventListener("htmx:afterRequest", function () { setTimeout(rescueFocus, 0); });
  document.addEventListener("parley:pushed", rescueFocus);

  document.addEventListener("DOMContentLoaded", function () {
    if (byId("transcript")) { scrollToEnd(); watchEarlier(); }
    var text = byId("composer-text");
    if (text && !(touch && touch.matches)) { text.focus(); }
    if (text) { takeCarried(text); sayLength(text); }
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

  // Where the focus was when each request started: a button disabled while its request runs
  // (hx-disabled-elt) loses the focus to the page.
  var focusedAtRequest = new WeakMap();
  document.addEventListener("htmx:beforeRequest", function (event) {
    var alert = alertOf(event.target);
    if (alert) { alert.textContent = ""; }
    if (event.detail.xhr) { focusedAtRequest.set(event.detail.xhr, document.activeElement); }
  });

  // A form that got no answer, or a server error, is offered again as it was, the focus where
  // it was: "Retry" sends it once more (the composer keeps its text; nothing was swapped).
  function sayFailed(event, text) {
    var alert = alertOf(event.target);
    if (!alert) { return; }
    var focused = event.detail.xhr && focusedAtRequest.get(event.detail.xhr);
    if (focused && focused.isConnected && (!document.activeElement || document.activeElement === document.body)) {
      focused.focus();
    }
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

  // A form may say it in its own words (the composer: not sent, and kept).
  document.addEventListener("htmx:sendError", function (event) {
    var own = event.target.closest && event.target.closest("[data-network-error]");
    sayFailed(event, (own || document.body).getAttribute("data-network-error"));
  });

  // A whole page where a part of one was expected (an error page, a proxy's 413): never put
  // in the page. Sent somewhere else (a session that ended, to the login page), go there;
  // else it is an error, said where the person acted.
  var WHOLE_PAGE = /^\s*(<!doctype html|<html)/i;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    if (typeof detail.serverResponse !== "string" || !WHOLE_PAGE.test(detail.serverResponse)) { return; }
    detail.shouldSwap = false;
    var xhr = detail.xhr;
    var moved = xhr.responseURL && new URL(xhr.responseURL).pathname !== new URL(detail.requestConfig.path, location.href).pathname;
    if (xhr.status < 400 && moved) { window.location.assign(xhr.responseURL); return; }
    detail.isError = true;
  });

  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var text = /^text\/plain/.test(xhr.getResponseHeader("Content-Type") || "") ? xhr.responseText : "";
    var own = event.target.closest && event.target.closest("[data-server-error]");
    sayFailed(event, text || (own || document.body).getAttribute("data-server-error"));
  });
})();

/* Questions: keyboard-first answering. */
(function () {
  "use strict";

  function all(root, selector) { return Array.prototype.slice.call(root.querySelectorAll(selector)); }

  function options(scope) {
    return all(scope, ".option-button, .option input[type=checkbox], .option input[type=radio]");
  }

  // --- Several questions: one step (tab) at a time, then the review ----------------------------
  // The template renders the tabs hidden; set up, a form shows one step and a tick on the tab
  // of each answered question. The review lists every answer, the unanswered ones by name.

  function stepTabs(form) { return all(form, ".question-step"); }
  function stepPanel(tab) { return document.getElementById(tab.getAttribute("aria-controls")); }
  function isStepped(form) { return !!form && form.classList.contains("is-stepped"); }
  function currentStep(form) {
    var tabs = stepTabs(form);
    for (var i = 0; i < tabs.length; i++) {
      if (tabs[i].getAttribute("aria-selected") === "true") { return i; }
    }
    return 0;
  }
  // Where the keys act: the step shown, or the whole block.
  function scopeOf(block) {
    var form = block.querySelector("form");
    return isStepped(form) ? stepPanel(stepTabs(form)[currentStep(form)]) : block;
  }

  // One question's answer as the form would send it: chosen labels and typed text.
  function answerOf(item) {
    var labels = all(item, "input:checked").filter(function (input) {
      return input.value && !input.hasAttribute("data-other");
    }).map(function (input) { return input.value; });
    var box = item.querySelector(".custom-input");
    return { labels: labels, custom: box && !box.disabled ? box.value.trim() : "" };
  }
  function isAnswered(item) {
    var answer = answerOf(item);
    return answer.labels.length > 0 || answer.custom !== "";
  }
  function nameOf(item) {
    var text = item.querySelector(".question-text");
    return item.getAttribute("data-name") || (text ? text.textContent.trim() : "");
  }
  function missingText(form, names) {
    var list = names.join(", ");
    if (window.Intl && Intl.ListFormat) {
      list = new Intl.ListFormat(document.documentElement.lang || undefined, { type: "conjunction" }).format(names);
    }
    return form.getAttribute("data-missing").replace("%(text)s", list);
  }

  function fillReview(form) {
    var review = form.querySelector(".question-review");
    var list = review.querySelector(".review-list");
    var missing = [];
    list.textContent = "";
    all(form, ".question-item").forEach(function (item) {
      var answer = answerOf(item);
      var term = document.createElement("dt");
      var value = document.createElement("dd");
      term.textContent = nameOf(item);
      if (isAnswered(item)) {
        value.textContent = answer.labels.concat(answer.custom ? [answer.custom] : []).join(", ");
      } else {
        value.textContent = review.getAttribute("data-unanswered");
        value.className = "review-unanswered";
        missing.push(nameOf(item));
      }
      list.appendChild(term);
      list.appendChild(value);
    });
    review.querySelector(".review-missing").textContent = missing.length ? missingText(form, missing) : "";
  }

  function markAnswered(form) {
    var tabs = stepTabs(form);
    all(form, ".question-item").forEach(function (item, index) {
      var done = isAnswered(item);
      tabs[index].classList.toggle("is-answered", done);
      tabs[index].querySelector(".step-done").hidden = !done;
      tabs[index].querySelector(".step-tick").hidden = !done;
      tabs[index].querySelector(".step-number").hidden = done;
    });
    if (currentStep(form) === tabs.length - 1) { fillReview(form); }
  }

  // The first thing to act on in a step: what is chosen, else the default or first option,
  // else the typed-answer box.
  // An approval lets a tool act: its Deny takes the focus, so that an Enter meant for
  // something else never allows it (Allow takes a click, or the arrow keys and Enter).
  function firstControl(scope) {
    if (scope.closest && scope.closest(".approval")) {
      var deny = scope.querySelector("button[value=deny]:not([disabled])");
      if (deny) { return deny; }
    }
    var list = options(scope);
    var chosen = list.filter(function (input) { return input.checked; })[0];
    return chosen || scope.querySelector("[data-default]") || list[0] || scope.querySelector(".custom-input:not([disabled])");
  }

  function showStep(form, index, focus) {
    var tabs = stepTabs(form);
    index = Math.max(0, Math.min(index, tabs.length - 1));
    tabs.forEach(function (tab, i) {
      tab.setAttribute("aria-selected", i === index ? "true" : "false");
      tab.tabIndex = i === index ? 0 : -1;
      stepPanel(tab).hidden = i !== index;
    });
    var review = index === tabs.length - 1;
    var submit = form.querySelector(".question-submit");
    form.querySelector(".question-next").hidden = review;
    submit.hidden = !review;
    if (review) { fillReview(form); }
    if (focus) {
      var target = review ? submit : firstControl(stepPanel(tabs[index]));
      if (target) { target.focus(); }
    }
  }

  function setUpSteps(block) {
    var form = block.querySelector("form");
    var tabs = form && form.querySelector(".question-steps");
    if (!tabs || isStepped(form)) { return; }
    tabs.hidden = false;
    form.classList.add("is-stepped");
    var items = all(form, ".question-item");
    var first = items.filter(function (item) { return !isAnswered(item); })[0];
    showStep(form, first ? items.indexOf(first) : items.length, false);
    markAnswered(form);
  }

  document.addEventListener("click", function (event) {
    var tab = event.target.closest && event.target.closest(".question-pending .question-step");
    var next = event.target.closest && event.target.closest(".question-pending .question-next");
    if (tab) {
      showStep(tab.closest("form"), stepTabs(tab.closest("form")).indexOf(tab), false);
      tab.focus();
    } else if (next) {
      showStep(next.form, currentStep(next.form) + 1, true);
    }
  });

  // --- Focus -----------------------------------------------------------------------------------

  // Focus moves into a question when it appears: the box of a free-form question, else the
  // default (or first) option; never the box when there are options to pick.
  // A tool's form starts at its first field, in the server's order (its chosen radio, if the
  // first field is a choice).
  function focusQuestion(block) {
    setUpSteps(block);
    var target = block.classList.contains("elicitation") ? firstField(block) : firstControl(scopeOf(block));
    if (target) { target.focus(); }
  }
  function firstField(block) {
    var first = block.querySelector(".elicitation-field :is(input, textarea)");
    if (first && first.type === "radio") {
      return first.form.querySelector('input[type="radio"][name="' + first.name + '"]:checked') || first;
    }
    return first || firstControl(block);
  }

  function pendingQuestions() {
    return all(document, ".question-pending");
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
      setUpSteps(block);
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
  // Alt+Up goes to the question announced while the person typed, else to the newest one
  // waiting on the page, wherever the focus is.
  document.addEventListener("keydown", function (event) {
    if (!event.altKey || event.key !== "ArrowUp" || event.ctrlKey || event.metaKey) { return; }
    var blocks = pendingQuestions();
    if (!waitingId && !blocks.length) { return; }
    event.preventDefault();
    if (waitingId) { goToWaiting(); return; }
    var block = blocks[blocks.length - 1];
    block.scrollIntoView({ block: "center" });
    focusQuestion(block);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var blocks = pendingQuestions();
    blocks.forEach(function (block) { known[block.id] = true; setUpSteps(block); });
    // A conversation focuses its newest question (at its end); the inbox opens at its top,
    // on the newest, leaving the focus where a page load puts it.
    if (blocks.length && !document.getElementById("inbox")) { focusQuestion(blocks[blocks.length - 1]); }
  });
  document.addEventListener("parley:pushed", noticeNewQuestions);

  // After an answer (or a rejection) is taken, the focus goes back to the composer; in the
  // inbox, to the next question waiting there (else the previous one). Taken is known from
  // the request's success or from the block's leaving the page, whichever comes first (the
  // block resolved in every tab may come over the socket before the request's own answer).
  var answering = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.target.closest && event.target.closest(".question-pending form");
    if (!form || event.target.hasAttribute("data-draft-saver")) { return; }
    var item = form.closest(".inbox-item");
    answering = { form: form, next: item && (item.nextElementSibling || item.previousElementSibling) };
  });
  function answerTaken() {
    var taken = answering;
    answering = null;
    var focused = document.activeElement;
    if (focused && focused !== document.body && !taken.form.contains(focused)) { return; }  // moved on
    var composer = document.getElementById("composer-text");
    var block = taken.next && taken.next.isConnected && taken.next.querySelector(".question-pending");
    if (composer) {
      composer.focus();
    } else if (block) {
      focusQuestion(block);
    }
  }
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (!answering || (elt.hasAttribute && elt.hasAttribute("data-draft-saver"))) { return; }
    if (!answering.form.contains(elt) && answering.form.isConnected) { return; }
    var status = event.detail.xhr && event.detail.xhr.status;
    if (event.detail.successful && status < 400) {
      answerTaken();
    } else {
      answering = null;  // refused or failed: the alert says why, the form stays
    }
  });
  document.addEventListener("parley:pushed", function () {
    if (answering && !answering.form.isConnected) { answerTaken(); }
  });

  // --- Answers checked before they are sent ----------------------------------------------------

  // A question's answer goes out only when every question has one (the server checks again):
  // the alert in the block names each question still missing, and nothing is sent. A choice
  // among single options wins over text kept in a closed "Other…" (the text stays a draft).
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!form.matches || !form.matches(".question-pending form[data-missing]")) { return; }
    var data = event.detail.formData;
    var missing = [];
    all(form, ".question-item").forEach(function (item, index) {
      var labels = data.getAll("q" + index).filter(Boolean);
      var custom = String(data.get("q" + index + "-custom") || "").trim();
      if (labels.length && custom && !item.querySelector("input[type=checkbox]")) {
        data.delete("q" + index + "-custom");
      }
      if (!labels.length && !custom) { missing.push(item); }
    });
    if (!missing.length) { return; }
    event.preventDefault();
    var alert = document.getElementById(form.getAttribute("data-alert"));
    alert.textContent = missingText(form, missing.map(nameOf));
    if (isStepped(form)) {
      showStep(form, all(form, ".question-item").indexOf(missing[0]), true);
    } else {
      var target = firstControl(missing[0]);
      if (target) { target.focus(); }
    }
  });

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
    var form = input.closest("form");
    if (input.hasAttribute("data-other")) {
      showOther(input, input.checked);
    } else if (input.type === "radio") {
      var item = input.closest(".question-item");
      var other = item && item.querySelector("input[type=radio][data-other]");
      if (other) { showOther(other, false); }
      // A single choice among several questions is made: on to the next step.
      if (isStepped(form)) { showStep(form, currentStep(form) + 1, true); }
    }
    if (isStepped(form)) { markAnswered(form); }
  });
  ["input", "parley:restored"].forEach(function (name) {
    document.addEventListener(name, function (event) {
      var form = event.target.closest && event.target.closest(".question-pending form");
      if (isStepped(form)) { markAnswered(form); }
    });
  });

  // --- Keys --------------------------------------------------------------------------------------

  var MOVES = ["ArrowDown", "ArrowUp", "ArrowLeft", "ArrowRight", "Home", "End"];

  // The tabs of several questions: arrows, Home and End move between the steps.
  function stepKeys(event, form) {
    var tabs = stepTabs(form);
    var index = tabs.indexOf(event.target);
    var next = { ArrowLeft: index - 1, ArrowUp: index - 1, ArrowRight: index + 1, ArrowDown: index + 1, Home: 0, End: tabs.length - 1 }[event.key];
    event.preventDefault();
    showStep(form, next, false);
    tabs[currentStep(form)].focus();
  }

  document.addEventListener("keydown", function (event) {
    var block = event.target.closest && event.target.closest(".question-pending");
    if (!block) { return; }
    var form = block.querySelector("form");
    var stepped = isStepped(form);
    var inAnswerBox = event.target.classList.contains("custom-input");
    var plain = !event.ctrlKey && !event.metaKey && !event.altKey;
    if (event.key === "Escape") {
      event.preventDefault();
      var composer = document.getElementById("composer-text");
      if (composer) { composer.focus(); }
      return;
    }
    if (stepped && event.target.classList.contains("question-step") && MOVES.indexOf(event.key) >= 0) {
      stepKeys(event, form);
      return;
    }
    if (event.key === "Enter" && !event.isComposing && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      var submit = block.querySelector(".question-submit");
      if (form && submit && !submit.disabled && (stepped || !submit.hidden)) { form.requestSubmit(submit); }
      return;
    }
    if (event.key === "Enter" && !event.isComposing && plain && !event.shiftKey && stepped &&
        (inAnswerBox || options(block).indexOf(event.target) >= 0)) {
      // Among several questions, Enter picks the focused choice and goes on to the next step.
      event.preventDefault();
      if (event.target.type === "radio" && !event.target.checked) {
        event.target.click();  // its change moves on
      } else {
        showStep(form, currentStep(form) + 1, true);
      }
      return;
    }
    if (event.key === "Enter" && !event.isComposing && inAnswerBox && !event.shiftKey && plain &&
        !event.target.hasAttribute("data-multiline")) {
      // Enter in the typed-answer box submits the typed answer (not the first option);
      // Shift+Enter starts a new line.
      event.preventDefault();
      var submitTyped = block.querySelector(".question-submit");
      if (form && submitTyped && !submitTyped.disabled) { form.requestSubmit(submitTyped); }
      return;
    }
    var scope = scopeOf(block);
    var list = options(scope);
    // Number keys pick (or toggle) the nth option of the question the focus is in (the options
    // show their keys); never of a confirmation or an approval, which take Enter or a click.
    if (/^[1-9]$/.test(event.key) && (block.classList.contains("question-confirm") || inAnswerBox || !plain)) { return; }
    if (/^[1-9]$/.test(event.key)) {
      var item = event.target.closest(".question-item") || scope;
      var own = options(item).length ? options(item) : list;
      var chosen = own[Number(event.key) - 1];
      if (chosen) {
        event.preventDefault();
        chosen.focus();
        chosen.click();
      }
      return;
    }
    if (MOVES.indexOf(event.key) < 0 || inAnswerBox) { return; }  // the caret moves there
    var index = list.indexOf(event.target);
    if (index < 0) { return; }
    event.preventDefault();
    if (stepped && (event.key === "ArrowLeft" || event.key === "ArrowRight")) {
      // Left and right go to the previous or next question.
      showStep(form, currentStep(form) + (event.key === "ArrowLeft" ? -1 : 1), true);
      return;
    }
    var next = index;
    if (event.key === "ArrowDown" || event.key === "ArrowRight") { next = Math.min(index + 1, list.length - 1); }
    if (event.key === "ArrowUp" || event.key === "ArrowLeft") { next = Math.max(index - 1, 0); }
    if (event.key === "Home") { next = 0; }
    if (event.key === "End") { next = list.length - 1; }
    list[next].focus();
  });
})();
