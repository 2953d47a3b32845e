/* Everyday chat niceties: the user menu and its theme switch, copy buttons, message times,
   the tab title, and the composer while the agent replies. Loaded as a file (the CSP allows
   no inline script). */
(function () {
  "use strict";

  function byId(id) { return document.getElementById(id); }

  function strings() {
    var el = byId("ui-strings");
    return el ? el.dataset : {};
  }

  // --- Theme: the switch's answer says which theme is now saved; the page follows at once.
  document.addEventListener("htmx:afterSwap", function (event) {
    var form = byId("theme-switch");
    if (form && event.target && (event.target === form || event.target.id === "theme-switch" || form.contains(event.target))) {
      var chosen = form.getAttribute("data-theme-current");
      document.documentElement.setAttribute("data-theme", chosen);
      // The settings page's own theme choice shows it too (saving that form keeps it).
      var radio = document.querySelector('.settings-form input[name="theme"][value="' + chosen + '"]');
      if (radio) { radio.checked = true; }
    }
  });

  // --- The user menu (the header's username): a disclosure button; Escape, a click
  // elsewhere or focus leaving it closes it; Escape gives focus back to the button.
  function menuButton() { return document.querySelector(".user-menu-button"); }

  function setMenu(open, refocus) {
    var button = menuButton();
    var panel = button && byId(button.getAttribute("aria-controls"));
    if (!panel || (button.getAttribute("aria-expanded") === "true") === open) { return; }
    button.setAttribute("aria-expanded", open ? "true" : "false");
    panel.hidden = !open;
    if (open) {
      var first = panel.querySelector("a, button");
      if (first) { first.focus(); }
    } else if (refocus) {
      button.focus();
    }
  }

  document.addEventListener("click", function (event) {
    var button = menuButton();
    if (!button) { return; }
    if (button.contains(event.target)) {
      setMenu(button.getAttribute("aria-expanded") !== "true", false);
    } else if (!button.parentElement.contains(event.target)) {
      setMenu(false, false);
    }
  });
  document.addEventListener("keydown", function (event) {
    var button = menuButton();
    if (event.key === "Escape" && button && button.getAttribute("aria-expanded") === "true") {
      setMenu(false, true);
    }
  });
  document.addEventListener("focusout", function (event) {
    var button = menuButton();
    // relatedTarget is null when focus goes nowhere (the theme switch swapped under it).
    if (button && event.relatedTarget && !button.parentElement.contains(event.relatedTarget)) {
      setMenu(false, false);
    }
  });

  // --- Copy buttons: each code block, each message, and anything marked data-copy-from.
  var status = null;
  function announce(text) {
    if (!status) {
      status = document.createElement("p");
      status.id = "copy-status";
      status.className = "visually-hidden";
      status.setAttribute("role", "status");
      status.setAttribute("aria-live", "polite");
      document.body.appendChild(status);
    }
    status.textContent = "";
    window.setTimeout(function () { status.textContent = text; }, 50);
  }

  function copy(button, text) {
    var label = button.textContent;
    function done(message) {
      button.textContent = message;
      announce(message);
      window.setTimeout(function () { button.textContent = label; }, 2000);
    }
    if (!navigator.clipboard) { done(strings().copyFailed); return; }
    navigator.clipboard.writeText(text).then(
      function () { done(strings().copied); },
      function () { done(strings().copyFailed); }
    );
  }

  function copyButton(label, className) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "copy-button " + className;
    button.textContent = label;
    return button;
  }

  function messageText(message) {
    return Array.prototype.map.call(message.querySelectorAll(".block-text"), function (block) {
      return block.innerText.trim();
    }).join("\n\n");
  }

  function addCopyButtons(root) {
    var s = strings();
    root.querySelectorAll(".markdown pre").forEach(function (pre) {
      if (pre.parentElement.classList.contains("code-block")) { return; }
      var wrapper = document.createElement("div");
      wrapper.className = "code-block";
      pre.parentNode.insertBefore(wrapper, pre);
      wrapper.appendChild(copyButton(s.copyCode, "copy-code"));
      wrapper.appendChild(pre);
    });
    // Each message is looked at once (a changed message arrives as a new element): on a long
    // transcript, looking into every message again on each streamed append took the page's
    // main thread for tens of milliseconds an append.
    root.querySelectorAll(".transcript > .message-user:not([data-copy-checked]), .transcript > .message-assistant:not([data-copy-checked])").forEach(function (message) {
      message.setAttribute("data-copy-checked", "");
      if (message.querySelector(":scope > .message-head .copy-message") || !message.querySelector(".block-text")) { return; }
      var head = message.querySelector(":scope > .message-head");
      if (head) { head.appendChild(copyButton(s.copyMessage, "copy-message")); }
    });
    root.querySelectorAll("[data-copy-from][hidden]").forEach(function (button) { button.hidden = false; });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".copy-button, [data-copy-from]");
    if (!button) { return; }
    if (button.hasAttribute("data-copy-from")) {
      var source = byId(button.getAttribute("data-copy-from"));
      if (source) { copy(button, source.value || source.textContent); }
    } else if (button.classList.contains("copy-code")) {
      copy(button, button.parentElement.querySelector("pre").innerText.replace(/\n$/, ""));
    } else {
      copy(button, messageText(button.closest(".message")));
    }
  });

  // --- Message times: relative ("5 minutes ago"), the exact time on hover, both in the
  // browser's time zone and the page's language; the server's text stays without script.
  var UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];
  var relative = null;
  var exact = null;
  function formatters() {
    if (relative || !window.Intl || !Intl.RelativeTimeFormat) { return !!relative; }
    var lang = document.documentElement.lang || undefined;
    relative = new Intl.RelativeTimeFormat(lang, { numeric: "auto" });
    exact = new Intl.DateTimeFormat(lang, { dateStyle: "full", timeStyle: "short" });
    return true;
  }

  // `seconds` since the time: a past time reads "6 minutes ago"; one a clock ahead of the
  // browser's puts a little in the future reads "now".
  function describe(seconds) {
    var ago = Math.max(0, seconds);
    for (var i = 0; i < UNITS.length; i++) {
      if (ago >= UNITS[i][1]) { return relative.format(-Math.round(ago / UNITS[i][1]), UNITS[i][0]); }
    }
    return relative.format(0, "second");
  }

  // `all`: every time on the page (the periodic update); else only the times that arrived
  // since (new or re-rendered messages). A time is rewritten only when its text changes: each
  // write makes the browser lay the transcript out again.
  function updateTimes(root, all) {
    if (!formatters()) { return; }
    var now = Date.now();
    var selector = all ? "time.message-time" : "time.message-time:not([data-relative])";
    root.querySelectorAll(selector).forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) { return; }
      var text = describe((now - when.getTime()) / 1000);
      if (el.textContent !== text) { el.textContent = text; }
      if (!el.hasAttribute("data-relative")) {
        el.title = exact.format(when);
        el.setAttribute("data-relative", "");
      }
    });
  }

  // --- The tab title follows the conversation's title (renamed, or named after its first
  // message). Another script may prefix it with a count; it re-applies that itself.
  // The page arrives with the right title (set by the server): only later changes are copied.
  var shownTitle = null;
  function followTitle() {
    var heading = byId("conversation-title");
    if (!heading) { return; }
    var title = heading.textContent.trim() + " · Parley";
    if (shownTitle !== null && shownTitle !== title) { document.title = title; }
    shownTitle = title;
  }

  // --- While the agent replies, Send is disabled (Stop is offered instead); when the reply
  // ends, Send comes back and a refusal shown meanwhile is cleared.
  var wasRunning = null;
  function followAgent() {
    var agent = byId("agent-status");
    var composer = byId("composer");
    if (!agent || !composer) { return; }
    var running = agent.hasAttribute("data-running");
    var send = composer.querySelector("button[type=submit]");
    if (send) { send.disabled = running; }
    if (wasRunning && !running) {
      var error = byId("composer-error");
      if (error) { error.remove(); }
      var text = byId("composer-text");
      if (text) {
        text.removeAttribute("aria-invalid");
        text.setAttribute("aria-describedby", "composer-hint agent-status");
      }
    }
    wasRunning = running;
  }

  function refresh(root) {
    addCopyButtons(root || document);
    updateTimes(root || document);
    followTitle();
    followAgent();
  }

  document.addEventListener("DOMContentLoaded", function () {
    refresh(document);
    window.setInterval(function () { updateTimes(document, true); }, 30000);
  });
  document.addEventListener("parley:pushed", function () { refresh(document); });
  document.addEventListener("htmx:afterSettle", function () { refresh(document); });
})();
