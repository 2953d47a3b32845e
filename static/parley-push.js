// Settings: "Notify this browser" (Web Push). On: register the service worker (/sw.js),
// subscribe with the PushManager under the server's VAPID key, and store the subscription
// (reach.views.subscribe). Off: unsubscribe, and the server forgets it.
(function () {
  "use strict";

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  function keyBytes(base64url) {
    const padded = (base64url + "===".slice((base64url.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      // The server's refusal, when it says why, is what the page shows.
      const answer = await response.json().catch(() => null);
      const refused = new Error("HTTP " + response.status);
      refused.reason = (answer && answer.message) || "";
      throw refused;
    }
  }

  function setUp() {
    const row = document.getElementById("push-setting");
    if (!row) return;
    const toggle = document.getElementById("push-switch");
    const status = document.getElementById("push-status");
    const say = (name) => { status.textContent = row.dataset[name] || ""; };
    const key = row.dataset.vapidKey;
    if (!key) { say("unavailable"); return; }
    if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
      say("unsupported");
      return;
    }
    let registration = null;

    async function current() {
      registration = registration || await navigator.serviceWorker.register(row.dataset.workerUrl);
      return registration.pushManager.getSubscription();
    }

    async function turnOn() {
      if (await Notification.requestPermission() !== "granted") {
        say("denied");
        return false;
      }
      await current();
      const subscription = await registration.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(key),
      });
      try {
        await post(row.dataset.subscribeUrl, subscription.toJSON());
      } catch (error) {
        await subscription.unsubscribe();
        throw error;
      }
      return true;
    }

    async function turnOff() {
      const subscription = await current();
      if (subscription) {
        await post(row.dataset.unsubscribeUrl, { endpoint: subscription.endpoint });
        await subscription.unsubscribe();
      }
    }

    toggle.addEventListener("change", async () => {
      const wanted = toggle.checked;
      toggle.disabled = true;
      try {
        if (wanted) {
          const on = await turnOn();
          toggle.checked = on;
          if (on) say("on");
        } else {
          await turnOff();
          say("off");
        }
      } catch (error) {
        toggle.checked = !wanted;
        if (error.reason) {
          status.textContent = error.reason;
        } else {
          say("failed");
        }
      } finally {
        toggle.disabled = false;
      }
    });

    current().then((subscription) => {
      toggle.checked = Boolean(subscription) && Notification.permission === "granted";
      say(toggle.checked ? "on" : "off");
    }).catch(() => say("off")).finally(() => { toggle.disabled = false; });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
