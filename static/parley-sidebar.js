/* The sidebar: each conversation's "⋯" menu (a menu button: arrow keys, Home, End, Escape),
   renaming in place, the Undo offered after a delete, Ctrl+K (⌘K) to search, and the arrow
   keys from the search box through the list. The actions themselves are htmx requests that
   answer with the sidebar's list (templates/chat/sidebar.html). Loaded as a file (the CSP
   allows no inline script). */
(function () {
  "use strict";

  // Seconds the Undo of a delete is offered (the server keeps the conversation for longer:
  // PARLEY_DELETE_UNDO_SECONDS).
  var UNDO_SECONDS = 10;

  function byId(id) { return document.getElementById(id); }
  function all(selector, root) { return Array.prototype.slice.call((root || document).querySelectorAll(selector)); }

  // --- The menus ------------------------------------------------------------------------
  var open = null;  // the menu button whose menu is open
  var openedAt = 0;  // where that button was when it opened (px from the viewport's top)

  function items(menu) { return all("[role=menuitem]", menu); }

  function closeMenu(refocus) {
    if (!open) { return; }
    var button = open;
    open = null;
    button.setAttribute("aria-expanded", "false");
    var menu = byId(button.getAttribute("aria-controls"));
    if (menu) { menu.hidden = true; }
    if (refocus) { button.focus(); }
  }

  function openMenu(button, last) {
    closeMenu(false);
    var menu = byId(button.getAttribute("aria-controls"));
    if (!menu) { return; }
    open = button;
    openedAt = button.getBoundingClientRect().top;
    button.setAttribute("aria-expanded", "true");
    menu.hidden = false;
    place(menu, button);
    var list = items(menu);
    if (list.length) { list[last ? list.length - 1 : 0].focus({ preventScroll: true }); }
  }

  // The menu is placed over the page (position: fixed), under its button or above it when
  // there is no room below, so the scrolling list does not cut it off; it closes when the
  // page moves under it (a scroll that ended before it opened leaves it open). Its place is set on the root element (--menu-top, --menu-left),
  // never on the menu: htmx copies a swapped element's attributes onto its replacement as
  // the swap settles, and the CSP refuses a style attribute copied so.
  function place(menu, button) {
    var at = button.getBoundingClientRect();
    var height = menu.offsetHeight;
    var below = at.bottom + 4;
    var root = document.documentElement.style;
    root.setProperty("--menu-top", (below + height > window.innerHeight ? Math.max(4, at.top - height - 4) : below) + "px");
    root.setProperty("--menu-left", Math.max(4, at.right - menu.offsetWidth) + "px");
  }
  ["scroll", "resize"].forEach(function (name) {
    window.addEventListener(name, function (event) {
      if (!open || (event.target.closest && event.target.closest(".sidebar-menu"))) { return; }
      if (Math.abs(open.getBoundingClientRect().top - openedAt) > 1) { closeMenu(false); }
    }, { capture: true, passive: true });
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    var button = target.closest && target.closest(".sidebar-menu-button");
    if (button) {
      if (open === button) { closeMenu(true); } else { openMenu(button, false); }
      return;
    }
    var rename = target.closest && target.closest("[data-rename]");
    if (rename) {
      closeMenu(false);
      startRename(byId(rename.getAttribute("data-rename")));
      return;
    }
    if (open && !(target.closest && target.closest("[role=menu]"))) { closeMenu(false); }
  });

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (target.classList && target.classList.contains("sidebar-menu-button") &&
        (event.key === "ArrowDown" || event.key === "ArrowUp")) {
      event.preventDefault();
      openMenu(target, event.key === "ArrowUp");
      return;
    }
    var menu = target.closest && target.closest(".sidebar-menu");
    if (!menu) { return; }
    var list = items(menu);
    var index = list.indexOf(target);
    var next = -1;
    if (event.key === "ArrowDown") { next = (index + 1) % list.length; }
    if (event.key === "ArrowUp") { next = (index - 1 + list.length) % list.length; }
    if (event.key === "Home") { next = 0; }
    if (event.key === "End") { next = list.length - 1; }
    if (next >= 0) {
      event.preventDefault();
      list[next].focus({ preventScroll: true });
    } else if (event.key === "Escape") {
      event.preventDefault();
      closeMenu(true);
    } else if (event.key === "Tab") {
      closeMenu(false);
    }
  });

  // The menu's item acts, then the menu closes; the list that comes back replaces it.
  var acted = null;  // the conversation whose menu was used last, to focus again after
  document.addEventListener("htmx:beforeRequest", function (event) {
    var item = event.target.closest && event.target.closest(".sidebar-item");
    if (item) { acted = item.getAttribute("data-conversation-id"); }
    if (event.target.closest && event.target.closest(".sidebar-menu")) { closeMenu(false); }
  });

  // --- Rename in place ------------------------------------------------------------------
  function startRename(form) {
    if (!form) { return; }
    var item = form.closest(".sidebar-item");
    item.classList.add("is-renaming");
    form.hidden = false;
    var input = form.querySelector("input[name=title]");
    input.focus();
    input.select();
  }

  function cancelRename(form) {
    var item = form.closest(".sidebar-item");
    form.hidden = true;
    item.classList.remove("is-renaming");
    var button = item.querySelector(".sidebar-menu-button");
    if (button) { button.focus(); }
  }

  document.addEventListener("keydown", function (event) {
    var form = event.target.closest && event.target.closest(".sidebar-rename");
    if (form && event.key === "Escape") {
      event.preventDefault();
      cancelRename(form);
    }
  });

  // --- After the list comes back: the focus, and the Undo's time -----------------------
  var undoTimer = null;
  document.addEventListener("htmx:afterSettle", function (event) {
    var list = byId("sidebar-list");
    if (!list || event.target.id !== "sidebar-list") { return; }
    window.clearTimeout(undoTimer);
    var undo = list.querySelector("[data-undo]");
    if (undo) {
      undo.querySelector("button").focus();
      undoTimer = window.setTimeout(function () {
        // The open conversation was the one deleted: with no Undo, a new one takes its place.
        if (window.location.pathname.indexOf("/c/" + undo.getAttribute("data-undo") + "/") === 0) {
          window.location.assign(undo.getAttribute("data-new-url"));
          return;
        }
        var focused = undo.contains(document.activeElement);
        undo.remove();
        if (focused) { byId("sidebar-search").focus(); }
      }, UNDO_SECONDS * 1000);
    } else if (acted) {
      var row = list.querySelector(".sidebar-item[data-conversation-id='" + acted + "'] .sidebar-menu-button");
      if (row) { row.focus(); }
    }
    acted = null;
  });

  // --- Search: Ctrl+K (⌘K on a Mac), then the arrow keys through what it finds ----------
  document.addEventListener("keydown", function (event) {
    if (!(event.ctrlKey || event.metaKey) || event.altKey || event.shiftKey || event.key.toLowerCase() !== "k") { return; }
    var box = byId("sidebar-search") || byId("list-search");
    if (!box) { return; }
    event.preventDefault();
    var toggle = document.querySelector(".sidebar-toggle");
    if (toggle && toggle.getAttribute("aria-expanded") === "false") { toggle.click(); }
    box.focus();
    box.select();
  });

  function links() { return all("#sidebar-list .sidebar-link"); }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") { return; }
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) { return; }
    var target = event.target;
    var list = links();
    if (target.id === "sidebar-search") {
      if (event.key === "ArrowDown" && list.length) {
        event.preventDefault();
        list[0].focus();
      }
      return;
    }
    var index = list.indexOf(target);
    if (index < 0) { return; }
    event.preventDefault();
    if (event.key === "ArrowDown") {
      list[Math.min(index + 1, list.length - 1)].focus();
    } else if (index === 0) {
      byId("sidebar-search").focus();
    } else {
      list[index - 1].focus();
    }
  });
})();
