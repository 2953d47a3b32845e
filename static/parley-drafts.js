/* Drafts of pending questions (questions.resolving.save_draft): the block posts what is chosen
   or typed as the user goes (htmx, debounced); this file names the page that typed it, restores
   a saved draft when a block appears, and shows "being answered in another tab" only in the
   other tabs. */
(function () {
  "use strict";

  // This page's id: the server echoes it back with every draft event, so the tab that typed
  // the draft knows the event is its own.
  var CLIENT = Date.now().toString(36) + Math.random().toString(36).slice(2, 12);

  // Text typed under a single choice's "Other…" stays in the draft after an option is picked
  // instead (its box closed, so not sent with the form): a draft with a label and text.
  function keptText(form, parameters) {
    Array.prototype.forEach.call(form.querySelectorAll(".custom-input[disabled]"), function (box) {
      var item = box.closest(".question-item");
      if (box.value && item && !item.querySelector("input[type=checkbox]")) { parameters[box.name] = box.value; }
    });
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.detail.elt;
    if (elt.hasAttribute("data-draft-saver")) {
      event.detail.parameters.client = CLIENT;
      keptText(elt.closest("form"), event.detail.parameters);
    }
  });

  function restoreAnswer(form, id, index, answer) {
    var inputs = form.querySelectorAll("input[name='q" + index + "']");
    var picked = false;
    var single = !form.querySelector("input[type=checkbox][name='q" + index + "']");
    Array.prototype.forEach.call(inputs, function (input) {
      if (input.value && (answer.labels || []).indexOf(input.value) >= 0) { input.checked = picked = true; }
    });
    if (!answer.custom) { return; }
    var boxId = "other-" + id + "-" + index;
    var other = form.querySelector("[data-other='" + CSS.escape(boxId) + "']");
    // A choice made and text kept: the text waits in the closed box.
    var open = !(picked && single);
    if (open && other && other.tagName === "BUTTON") {
      if (other.getAttribute("aria-expanded") !== "true") { other.click(); }
    } else if (open && other && !other.checked) {
      other.checked = true;
      other.dispatchEvent(new Event("change", { bubbles: true }));
    }
    var box = document.getElementById(boxId);
    var text = box && box.querySelector(".custom-input");
    if (text) { text.value = answer.custom; }
  }

  function restoreDrafts() {
    var forms = document.querySelectorAll(".question-pending form[data-draft]");
    Array.prototype.forEach.call(forms, function (form) {
      var draft;
      try { draft = JSON.parse(form.getAttribute("data-draft")); } catch (error) { draft = []; }
      form.removeAttribute("data-draft");
      var id = form.closest(".question").id.slice("question-".length);
      (Array.isArray(draft) ? draft : []).forEach(function (answer, index) {
        restoreAnswer(form, id, index, answer || {});
      });
      // What the form shows follows its answers (the ticks of several questions).
      form.dispatchEvent(new CustomEvent("parley:restored", { bubbles: true }));
    });
  }

  function showElsewhere() {
    var lines = document.querySelectorAll(".question-elsewhere[data-client]");
    Array.prototype.forEach.call(lines, function (line) {
      line.hidden = line.getAttribute("data-client") === CLIENT;
    });
  }

  document.addEventListener("DOMContentLoaded", restoreDrafts);
  document.addEventListener("parley:pushed", function () {
    restoreDrafts();
    showElsewhere();
  });
})();
