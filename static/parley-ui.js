/* Everyday chat niceties: the user menu and its theme switch, copy buttons, code blocks'
   headers, messages' actions, "Jump to latest", message times, the tab title, and the
   composer while the agent replies. Loaded as a file (the CSP allows no inline script). */
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

  // --- Settings: each named control of the preferences form saves as it changes (htmx posts
  // the form and swaps in the saved one; #settings-status says so), so Save settings, there
  // for pages without script, goes. A "Custom…" deadline waits for its minutes. A change made
  // while a save is on its way is kept and saved on the form that comes back.
  var saveButton = byId("settings-save");
  if (saveButton && byId("settings-form")) { saveButton.hidden = true; }
  var unsaved = null;  // name -> value (or checked) changed while a save was on its way
  document.addEventListener("htmx:afterSettle", function () {
    var form = byId("settings-form");
    if (!unsaved || !form || form.classList.contains("htmx-request")) { return; }
    Object.keys(unsaved).forEach(function (name) {
      var field = form.elements.namedItem(name);
      if (!field) { return; }
      if (field.type === "checkbox") { field.checked = unsaved[name]; } else { field.value = unsaved[name]; }
    });
    unsaved = null;
    form.requestSubmit();
  });
  document.addEventListener("change", function (event) {
    var control = event.target;
    var form = control.form;
    if (!form || !form.hasAttribute("data-saves-on-change") || !control.name) { return; }
    var minutes = form.elements.namedItem("expire_minutes");
    if (control.name === "expire" && control.value === "custom" && minutes && !minutes.value) {
      minutes.focus();
      return;
    }
    if (control.name === "theme") {
      // The page follows at once, and so does the user menu's switch.
      document.documentElement.setAttribute("data-theme", control.value);
      var other = document.querySelector('#theme-switch input[name="theme"][value="' + control.value + '"]');
      if (other) { other.checked = true; }
    }
    if (form.classList.contains("htmx-request")) {
      unsaved = unsaved || {};
      unsaved[control.name] = control.type === "checkbox" ? control.checked : control.value;
      return;
    }
    form.requestSubmit();
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

  // An icon button says "Copied" in its name (its icon stays); a text button in its text.
  function copy(button, text) {
    var icon = button.classList.contains("icon-button");
    var label = icon ? button.getAttribute("aria-label") : button.textContent;
    function show(text) {
      if (icon) { button.setAttribute("aria-label", text); } else { button.textContent = text; }
    }
    function done(message) {
      show(message);
      button.classList.add("is-done");
      announce(message);
      window.setTimeout(function () { show(label); button.classList.remove("is-done"); }, 2000);
    }
    if (!navigator.clipboard) { done(strings().copyFailed); return; }
    navigator.clipboard.writeText(text).then(
      function () { done(strings().copied); },
      function () { done(strings().copyFailed); }
    );
  }

  // The text shown: the message's own, or the older version shown in its place.
  function messageText(message) {
    var shown = message.classList.contains("is-older") ? ":scope > .branch-shown > .block-text" : ":scope > .block-text";
    return Array.prototype.map.call(message.querySelectorAll(shown), function (block) {
      return block.innerText.trim();
    }).join("\n\n");
  }

  // Each code block gets a header: its language, and its copy button.
  function addCodeHeaders(root) {
    var s = strings();
    root.querySelectorAll(".markdown:not(.draft-markdown) pre").forEach(function (pre) {
      if (pre.parentElement.classList.contains("code-block")) { return; }
      var code = pre.querySelector("code");
      var language = code && /(?:^| )language-(\S+)/.exec(code.className);
      var wrapper = document.createElement("div");
      wrapper.className = "code-block";
      var head = document.createElement("div");
      head.className = "code-head";
      var name = document.createElement("span");
      name.className = "code-language";
      name.textContent = language ? language[1] : s.code;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-button copy-code";
      button.textContent = s.copyCode;
      head.appendChild(name);
      head.appendChild(button);
      pre.parentNode.insertBefore(wrapper, pre);
      wrapper.appendChild(head);
      wrapper.appendChild(pre);
    });
    root.querySelectorAll("[data-copy-from][hidden]").forEach(function (button) { button.hidden = false; });
  }

  // A message's actions are named by its place in the transcript ("Copy message 3"), so that
  // each name is unique; numbered again whenever messages arrive or earlier ones load.
  function numberActions() {
    var s = strings();
    var n = 0;
    document.querySelectorAll("#transcript > .message:not(.message-empty)").forEach(function (message) {
      n += 1;
      addSwitchers(n, message);
      var actions = message.querySelector(":scope > .message-head > .message-actions");
      if (!actions) { return; }
      var copyButton = actions.querySelector(".copy-message");
      if (copyButton && !copyButton.classList.contains("is-done")) {
        copyButton.setAttribute("aria-label", s.copyMessageN.replace("{number}", n));
      }
      var edit = actions.querySelector(".edit-toggle");
      if (edit) { edit.setAttribute("aria-label", s.editMessageN.replace("{number}", n)); }
    });
  }

  // --- Branches: an edit or a regenerated reply supersedes messages, which stay in the
  // transcript hidden, just before what replaced them. The run of superseded messages right
  // before a message holds its older versions: one per action (an action's messages took
  // consecutive change numbers), each starting with a message of the same role.
  function olderVersions(message) {
    var run = [];
    for (var el = message.previousElementSibling; el && el.classList.contains("message-superseded"); el = el.previousElementSibling) {
      run.unshift(el);
    }
    var groups = [];
    run.forEach(function (el) {
      var seq = Number(el.getAttribute("data-seq"));
      var group = groups[groups.length - 1];
      if (!group || seq !== group.seq + 1) { group = { first: el, texts: [] }; groups.push(group); }
      group.seq = seq;
      var role = message.classList.contains("message-user") ? "message-user" : "message-assistant";
      var text = el.querySelector(":scope > .branch-text");
      if (text && el.classList.contains(role) && (role === "message-assistant" || !group.texts.length)) {
        group.texts.push(text);
      }
    });
    var role = message.classList.contains("message-user") ? "message-user" : "message-assistant";
    return groups.filter(function (group) { return group.first.classList.contains(role) && group.texts.length; });
  }

  function showVersion(message, index) {
    var versions = message.parleyVersions;
    var older = message.querySelector(":scope > .branch-shown");
    if (older) { older.remove(); }
    message.classList.toggle("is-older", index < versions.length);
    if (index < versions.length) {
      older = document.createElement("div");
      older.className = "branch-shown";
      versions[index].texts.forEach(function (text) {
        Array.prototype.forEach.call(text.children, function (child) { older.appendChild(child.cloneNode(true)); });
      });
      message.querySelector(":scope > .message-head").insertAdjacentElement("afterend", older);
    }
    var switcher = message.querySelector(".branch-switcher");
    switcher.querySelector(".branch-place").textContent = (index + 1) + "/" + (versions.length + 1);
    switcher.querySelector(".branch-previous").disabled = index === 0;
    switcher.querySelector(".branch-next").disabled = index === versions.length;
    message.parleyVersion = index;
  }

  function addSwitchers(number, message) {
    var head = message.querySelector(":scope > .message-head");
    var switcher = head && head.querySelector(".branch-switcher");
    var versions = head && !message.classList.contains("is-draft") ? olderVersions(message) : [];
    if (!versions.length) { if (switcher) { switcher.remove(); } return; }
    var s = strings();
    if (!switcher) {
      switcher = document.createElement("span");
      switcher.className = "branch-switcher";
      switcher.setAttribute("role", "group");
      [["branch-previous", "‹"], ["branch-place", ""], ["branch-next", "›"]].forEach(function (part) {
        var el = document.createElement(part[0] === "branch-place" ? "span" : "button");
        el.className = part[0];
        el.textContent = part[1];
        if (el.tagName === "BUTTON") { el.type = "button"; }
        switcher.appendChild(el);
      });
      head.insertBefore(switcher, head.querySelector(".message-actions"));
    }
    switcher.setAttribute("aria-label", s.versionsN.replace("{number}", number));
    switcher.querySelector(".branch-previous").setAttribute("aria-label", s.previousVersionN.replace("{number}", number));
    switcher.querySelector(".branch-next").setAttribute("aria-label", s.nextVersionN.replace("{number}", number));
    message.parleyVersions = versions;
    var index = message.parleyVersion;
    showVersion(message, index === undefined || index > versions.length ? versions.length : index);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".branch-previous, .branch-next");
    if (!button || button.disabled) { return; }
    var message = button.closest(".message");
    showVersion(message, message.parleyVersion + (button.classList.contains("branch-next") ? 1 : -1));
    // At either end the button used is disabled: the focus goes to the other one.
    if (button.disabled) {
      var other = button.parentNode.querySelector(button.classList.contains("branch-next") ? ".branch-previous" : ".branch-next");
      if (other && !other.disabled) { other.focus(); }
    }
  });

  function toggleEdit(button, open) {
    var form = byId(button.getAttribute("aria-controls"));
    if (!form) { return; }
    form.hidden = !open;
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) { form.querySelector("textarea").focus(); } else { button.focus(); }
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest && event.target.closest(".edit-toggle, .edit-cancel");
    if (target && target.classList.contains("edit-toggle")) {
      toggleEdit(target, target.getAttribute("aria-expanded") !== "true");
    } else if (target) {
      var message = target.closest(".message");
      var toggle = message && message.querySelector(".edit-toggle");
      if (toggle) { toggleEdit(toggle, false); }
    }
    var button = event.target.closest && event.target.closest(".copy-button, [data-copy-from]");
    if (!button) { return; }
    if (button.hasAttribute("data-copy-from")) {
      var source = byId(button.getAttribute("data-copy-from"));
      if (source) { copy(button, source.value || source.textContent); }
    } else if (button.classList.contains("copy-code")) {
      copy(button, button.closest(".code-block").querySelector("pre").innerText.replace(/\n$/, ""));
    } else {
      copy(button, messageText(button.closest(".message")));
    }
  });

  // --- "Jump to latest": new text arrived while the reader was scrolled up, away from it.
  var away = false;
  function nearBottom() {
    var doc = document.scrollingElement || document.documentElement;
    return doc.scrollHeight - doc.scrollTop - doc.clientHeight < 160;
  }
  function showJump(visible) {
    var jump = byId("jump-latest");
    if (jump && jump.hidden === visible) { jump.hidden = !visible; }
  }
  window.addEventListener("scroll", function () {
    away = !nearBottom();
    if (!away) { showJump(false); }
  }, { passive: true });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (away) { showJump(true); }
  });
  function scrollToEnd() {
    var doc = document.scrollingElement || document.documentElement;
    doc.scrollTop = doc.scrollHeight;
  }
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#jump-latest")) { return; }
    scrollToEnd();
    away = false;
    showJump(false);
    var text = byId("composer-text");
    if (text) { text.focus({ preventScroll: true }); }
  });

  // --- Streamed text as markdown: the socket appends the draft's escaped text to #draft-N;
  // each frame moves what arrived into `streamed` (so the page holds the words once, where
  // they are read) and a sibling shows the whole text rendered.
  // Only elements and text nodes are made (never HTML parsed): the model's text cannot become
  // markup. A marker not closed yet ("**bo") is left out rather than shown raw. The finished
  // message is rendered by the server (chat/markdown.py) and replaces all of this.
  var INLINE = /(\*\*|__|\*|_|`)/;
  function inline(parent, text) {
    var parts = text.split(INLINE);
    var stack = [parent];
    var open = [];
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      if (!part) { continue; }
      var top = stack[stack.length - 1];
      var inCode = open[open.length - 1] === "`";
      if (i % 2 === 1 && (!inCode || part === "`")) {
        if (open[open.length - 1] === part) { open.pop(); stack.pop(); continue; }
        if ((part === "_" || part === "*") && /\w$/.test(parts[i - 1] || "") && /^\w/.test(parts[i + 1] || "")) {
          top.appendChild(document.createTextNode(part));  // snake_case, 2*3*4
          continue;
        }
        var el = document.createElement(part === "`" ? "code" : part.length === 2 ? "strong" : "em");
        top.appendChild(el);
        stack.push(el);
        open.push(part);
        continue;
      }
      top.appendChild(document.createTextNode(part));
    }
  }

  function renderMarkdown(target, text) {
    target.textContent = "";
    var lines = text.split("\n");
    var block = null;   // the paragraph, list or code being filled
    var kind = "";
    function close() { block = null; kind = ""; }
    function start(tag, k) {
      block = document.createElement(tag);
      kind = k;
      target.appendChild(block);
      return block;
    }
    lines.forEach(function (line) {
      if (kind === "code") {
        if (/^\s*```/.test(line)) { close(); return; }
        block.firstChild.appendChild(document.createTextNode(line + "\n"));
        return;
      }
      var fence = /^\s*```\s*(\S*)/.exec(line);
      var heading = /^(#{1,6})\s+(.*)$/.exec(line);
      var item = /^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/.exec(line);
      if (fence) {
        var code = document.createElement("code");
        if (fence[1]) { code.className = "language-" + fence[1]; }
        start("pre", "code").appendChild(code);
      } else if (!line.trim()) {
        close();
      } else if (heading) {
        close();
        inline(start("h" + heading[1].length, "h"), heading[2]);
        close();
      } else if (item) {
        var listKind = item[1] ? "ol" : "ul";
        if (kind !== listKind) { start(listKind, listKind); }
        var li = document.createElement("li");
        block.appendChild(li);
        inline(li, item[2]);
      } else {
        if (kind !== "p") { start("p", "p"); } else { block.appendChild(document.createElement("br")); }
        inline(block, line);
      }
    });
  }

  var pendingDrafts = {};
  var streamed = {};
  var drawScheduled = false;
  function drawDrafts() {
    drawScheduled = false;
    var ids = Object.keys(pendingDrafts);
    if (!ids.length) { return; }
    ids.forEach(function (id) {
      var source = byId(id);
      if (!source) { return; }
      var shown = source.nextElementSibling;
      if (!shown || !shown.classList.contains("draft-markdown")) {
        shown = document.createElement("div");
        shown.className = "block block-text markdown draft-markdown";
        source.parentNode.insertBefore(shown, source.nextSibling);
        source.hidden = true;
        streamed[id] = "";
      }
      streamed[id] += source.textContent;
      source.textContent = "";
      renderMarkdown(shown, streamed[id]);
    });
    pendingDrafts = {};
    // The text grew after static/parley.js followed it to the end: a reader there stays there.
    if (!away) { scrollToEnd(); }
  }
  function redraw(id) {
    pendingDrafts[id] = true;
    if (!drawScheduled) { drawScheduled = true; window.requestAnimationFrame(drawDrafts); }
  }
  var APPENDED = /^<div hx-swap-oob="beforeend:#(draft-\d+)">/;
  document.addEventListener("htmx:wsAfterMessage", function (event) {
    var appended = APPENDED.exec(event.detail.message || "");
    if (appended) { redraw(appended[1]); }
  });
  // A draft that arrives whole (a new message, a tab's catch-up) is drawn at once, unseen raw.
  function drawAllDrafts() {
    document.querySelectorAll(".draft-text[id]").forEach(function (draft) { pendingDrafts[draft.id] = true; });
    drawDrafts();
  }

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

  // A deadline still ahead reads "in 5 minutes" (seconds in its last minute), counted down
  // from its `data-deadline` (questions/question_meta.html); one past reads "now" until the
  // server expires the question and its card changes.
  function describeAhead(seconds) {
    var ahead = Math.max(0, seconds);
    for (var i = 0; i < UNITS.length; i++) {
      if (ahead >= UNITS[i][1]) { return relative.format(Math.round(ahead / UNITS[i][1]), UNITS[i][0]); }
    }
    return ahead >= 1 ? relative.format(Math.floor(ahead), "second") : relative.format(0, "second");
  }

  function updateDeadlines() {
    if (!formatters()) { return; }
    var now = Date.now();
    document.querySelectorAll(".deadline-when[data-deadline]").forEach(function (el) {
      var when = new Date(el.getAttribute("data-deadline"));
      if (isNaN(when.getTime())) { return; }
      var text = describeAhead((when.getTime() - now) / 1000);
      if (el.textContent !== text) { el.textContent = text; }
    });
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
  // ends, Send comes back and a refusal shown meanwhile is cleared. While the conversation's
  // socket is down the agent's state is not known: Send is offered, and a message that
  // cannot be sent says so in the composer's alert (static/parley.js).
  var wasRunning = null;
  function followAgent() {
    var agent = byId("agent-status");
    var composer = byId("composer");
    if (!agent || !composer) { return; }
    var running = agent.hasAttribute("data-running");
    var lost = !!document.querySelector("#conversation-live[data-connection='lost']");
    var send = composer.querySelector("button[type=submit]");
    if (send) { send.disabled = running && !lost; }
    if (wasRunning && !running) {
      var error = byId("composer-error");
      if (error) { error.textContent = ""; }  // kept: the next failure is said in it
      var text = byId("composer-text");
      if (text) {
        text.removeAttribute("aria-invalid");
        text.setAttribute("aria-describedby", "composer-hint agent-status");
      }
    }
    wasRunning = running;
  }

  // --- The share panel (the owner's "Share" button): opens below the title with the focus in
  // its Username box; Close or Escape shuts it and gives the focus back to the button.
  function sharePanel(open, refocus) {
    var toggle = byId("share-toggle");
    var panel = byId("share-panel");
    if (!toggle || !panel) { return; }
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      var box = byId("share-username");
      if (box) { box.focus(); }
    } else if (refocus) {
      toggle.focus();
    }
  }
  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target.closest) { return; }
    if (target.closest("#share-toggle")) {
      sharePanel(byId("share-toggle").getAttribute("aria-expanded") !== "true", true);
    } else if (target.closest(".share-close")) {
      sharePanel(false, true);
    }
  });
  document.addEventListener("keydown", function (event) {
    var panel = byId("share-panel");
    if (event.key === "Escape" && panel && !panel.hidden && panel.contains(document.activeElement)) {
      sharePanel(false, true);
    }
  });

  function refresh(root) {
    addCodeHeaders(root || document);
    numberActions();
    drawAllDrafts();
    updateTimes(root || document);
    updateDeadlines();
    followTitle();
    followAgent();
  }

  document.addEventListener("DOMContentLoaded", function () {
    refresh(document);
    window.setInterval(function () { updateTimes(document, true); }, 30000);
    window.setInterval(updateDeadlines, 1000);
  });
  document.addEventListener("parley:pushed", function () { refresh(document); });
  document.addEventListener("parley:connection", followAgent);
  document.addEventListener("htmx:afterSettle", function () { refresh(document); });
})();
