/* The user's live channel on every signed-in page (templates/questions/live.html): while
   questions wait, the tab's title starts with "(N) " and its icon shows a badge; a question
   asked while the tab is hidden may notify; the sidebar's markers and the inbox's list follow
   the pushed state. Also the sidebar's toggle on a phone. Loaded as a file (the CSP allows no
   inline script). */
(function () {
  "use strict";

  var PREFIX = /^\(\d+\) /;
  var known = null;  // keys of the questions this tab has already been told about

  function byId(id) { return document.getElementById(id); }
  function all(selector, root) { return Array.prototype.slice.call((root || document).querySelectorAll(selector)); }
  function channel() { return document.querySelector(".live[ws-connect]"); }

  // The channel's call for the sidebar's list to load again (a conversation made, shared or
  // unshared) is for a page that has one: elsewhere (the inbox, Settings) it is left out.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "sidebar-refresh" && !byId("sidebar-list")) { event.detail.shouldSwap = false; }
  });

  function pending() {
    var state = byId("live-state");
    if (!state) { return null; }
    return {
      count: Number(state.getAttribute("data-count")) || 0,
      notify: state.getAttribute("data-notify") === "true",
      questions: all("li[data-key]", state).map(function (item) {
        return {
          key: item.getAttribute("data-key"),
          conversation: item.getAttribute("data-conversation-id"),
          url: item.getAttribute("data-url"),
          text: item.textContent.trim()
        };
      })
    };
  }

  // The title: another script may set a new plain title at any time (a rename), so the prefix
  // is put back whenever the title changes.
  function applyTitle() {
    var now = pending();
    if (!now) { return; }
    var plain = document.title.replace(PREFIX, "");
    var wanted = now.count > 0 ? "(" + now.count + ") " + plain : plain;
    if (document.title !== wanted) { document.title = wanted; }
  }

  function applyIcon(count) {
    var live = channel();
    var icon = document.querySelector("link[rel~='icon']");
    if (!live || !icon) { return; }
    var href = live.getAttribute(count > 0 ? "data-icon-pending" : "data-icon");
    if (icon.getAttribute("href") !== href) { icon.setAttribute("href", href); }
  }

  // Sidebar and list rows: a marker on each conversation waiting for an answer, and the count.
  function applyMarkers(now) {
    var waiting = {};
    now.questions.forEach(function (question) { waiting[question.conversation] = true; });
    all("[data-waiting-marker]").forEach(function (marker) {
      var row = marker.closest("[data-conversation-id]");
      var on = !!(row && waiting[row.getAttribute("data-conversation-id")]);
      marker.hidden = !on;
      if (row) { row.classList.toggle("is-waiting", on); }
    });
    var conversations = Object.keys(waiting).length;
    all("[data-waiting-count]").forEach(function (el) { el.textContent = String(conversations); });
    all("[data-waiting-summary]").forEach(function (el) { el.hidden = conversations === 0; });
  }

  // A notification for a question this tab had not heard of, while the tab is hidden; of the
  // user's hidden tabs only the first to claim the question notifies (and the tag makes any
  // second one replace the first rather than add to it).
  function claim(key) {
    try {
      var name = "parley-notified:" + key;
      if (window.localStorage.getItem(name)) { return false; }
      var now = Date.now();
      for (var i = window.localStorage.length - 1; i >= 0; i--) {  // forget claims after a day
        var other = window.localStorage.key(i);
        if (other && other.indexOf("parley-notified:") === 0 && now - Number(window.localStorage.getItem(other)) > 86400000) {
          window.localStorage.removeItem(other);
        }
      }
      window.localStorage.setItem(name, String(now));
    } catch (error) { /* storage unavailable: the tag still keeps it to one */ }
    return true;
  }

  function focusQuestion(url) {
    var hash = url.indexOf("#");
    var block = hash >= 0 ? byId(url.slice(hash + 1)) : null;
    var target = block && block.querySelector("[data-default], .option-button, .option input, .custom-input");
    if (target) { target.focus(); }
  }

  function notify(now, question, title) {
    if (!now.notify || !("Notification" in window) || Notification.permission !== "granted") { return; }
    if (document.visibilityState !== "hidden" || !claim(question.key)) { return; }
    var live = channel();
    var notification = new Notification(title || (live ? live.getAttribute("data-notification-title") : "Parley"), {
      body: question.text,
      tag: "parley-question-" + question.key
    });
    notification.onclick = function () {
      window.focus();
      notification.close();
      var here = window.location.pathname + window.location.search;
      if (question.url.split("#")[0] === here) {
        window.location.hash = question.url.split("#")[1] || "";
        focusQuestion(question.url);
      } else {
        window.location.href = question.url;
      }
    };
  }

  function applyState() {
    var now = pending();
    if (!now) { return; }
    applyTitle();
    applyIcon(now.count);
    applyMarkers(now);
    var keys = now.questions.map(function (question) { return question.key; });
    if (known !== null) {
      var fresh = now.questions.filter(function (question) { return known.indexOf(question.key) < 0; });
      if (fresh.length) { notify(now, fresh[0]); }  // the newest
    }
    known = keys;
  }

  // The inbox: the pushed items come in a template; items already shown stay as they are (with
  // whatever the user chose or typed), new ones are put in their place, answered ones go.
  function reconcileInbox() {
    var incoming = byId("inbox-incoming");
    var list = byId("inbox");
    var template = incoming && incoming.querySelector("template");
    if (!template || !list) { return; }
    var items = Array.prototype.slice.call(template.content.children);
    template.remove();
    var keep = {};
    items.forEach(function (item) { keep[item.id] = true; });
    Array.prototype.slice.call(list.children).forEach(function (item) {
      if (!keep[item.id]) { item.remove(); }
    });
    var next = null;
    for (var i = items.length - 1; i >= 0; i--) {
      var shown = byId(items[i].id);
      if (shown && shown.parentNode === list) { next = shown; continue; }
      var item = document.importNode(items[i], true);
      list.insertBefore(item, next);
      if (window.htmx) { window.htmx.process(item); }
      next = item;
    }
    var empty = byId("inbox-empty");
    if (empty) { empty.hidden = list.children.length > 0; }
  }

  // The open conversation's new title (pushed by its own socket) shows in the sidebar too.
  function applySidebarTitle() {
    var heading = byId("conversation-title");
    var current = document.querySelector(".sidebar-item a[aria-current='page'] .sidebar-title");
    if (heading && current && current.textContent !== heading.textContent) {
      current.textContent = heading.textContent;
    }
  }

  // A question expires soon: the same notification path, under its own title and key.
  function applyReminder() {
    var reminder = byId("live-reminder");
    if (!reminder || !reminder.getAttribute("data-key") || reminder.hasAttribute("data-done")) { return; }
    reminder.setAttribute("data-done", "");
    notify(
      { notify: reminder.getAttribute("data-notify") === "true" },
      { key: reminder.getAttribute("data-key"), text: reminder.textContent.trim(), url: reminder.getAttribute("data-url") },
      reminder.getAttribute("data-title")
    );
  }

  // What these read comes in pushed messages (the live channel's, a conversation's title):
  // followed once per message, after all its parts are in (parley.js).
  document.addEventListener("parley:pushed", function () {
    reconcileInbox();
    applyState();
    applySidebarTitle();
    applyReminder();
  });
  // A list swapped in (the sidebar's search, a renamed row) shows the markers of now.
  document.addEventListener("htmx:afterSettle", function () {
    var now = pending();
    if (now) { applyMarkers(now); }
    var list = byId("inbox");
    var empty = byId("inbox-empty");
    if (list && empty) { empty.hidden = list.children.length > 0; }
  });

  // Permission is asked for only after the user's own gesture: ticking the setting, or the
  // inbox's "Enable notifications" button.
  function askPermission(onBlocked) {
    if (!("Notification" in window)) { return; }
    if (Notification.permission === "denied") { onBlocked(); return; }
    if (Notification.permission === "default") {
      Notification.requestPermission().then(function (answer) {
        if (answer === "denied") { onBlocked(); }
        updatePrompt();
      });
    }
  }

  function updatePrompt() {
    var now = pending();
    all("[data-notify-prompt]").forEach(function (prompt) {
      prompt.hidden = !(now && now.notify && "Notification" in window && Notification.permission === "default");
    });
  }

  function showBlocked(after) {
    var live = channel();
    if (!live || !after) { return; }
    var note = byId("notifications-blocked");
    if (!note) {
      note = document.createElement("p");
      note.id = "notifications-blocked";
      note.className = "form-error";
      note.setAttribute("role", "alert");
      after.insertAdjacentElement("afterend", note);
    }
    note.textContent = live.getAttribute("data-notifications-blocked");
  }

  // The settings form is swapped for the saved one as the switch saves (static/parley-ui.js),
  // maybe before the browser answers: the note goes beside the switch on the page now, and
  // comes back after each swap while the switch stays on.
  var blocked = false;
  function showBlockedBesideSwitch() {
    var box = byId("id_notify_in_browser");
    if (box && box.checked) { showBlocked(box.closest("div") || box); } else { blocked = false; }
  }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (box.id === "id_notify_in_browser" && box.checked) {
      askPermission(function () { blocked = true; showBlockedBesideSwitch(); });
    }
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (blocked && !byId("notifications-blocked")) { showBlockedBesideSwitch(); }
  });

  document.addEventListener("click", function (event) {
    var enable = event.target.closest && event.target.closest("[data-enable-notifications]");
    if (enable) {
      askPermission(function () { showBlocked(enable.parentNode); });
    }
    var toggle = event.target.closest && event.target.closest(".sidebar-toggle");
    if (toggle) {
      toggle.setAttribute("aria-expanded", toggle.getAttribute("aria-expanded") === "true" ? "false" : "true");
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    applyState();
    updatePrompt();
    var head = document.head;
    if (head && window.MutationObserver) {
      new MutationObserver(applyTitle).observe(head, { childList: true, subtree: true, characterData: true });
    }
  });
  // Opened at a question (a notification, the inbox's link): focus it once the browser has
  // scrolled to it (which it does after the page's own focusing, and takes the focus away).
  window.addEventListener("load", function () {
    if (window.location.hash) { focusQuestion(window.location.hash); }
  });
})();
