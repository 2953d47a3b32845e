// Parley's service worker: shows a Web Push (reach/push.py: {title, body, url, tag}) and,
// when it is clicked, focuses a tab already on that conversation or opens one.
self.addEventListener("push", (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (error) {
    data = { title: event.data ? event.data.text() : "Parley" };
  }
  event.waitUntil(
    self.registration.showNotification(data.title || "Parley", {
      body: data.body || "",
      tag: data.tag || undefined,
      data: { url: data.url || "/" },
      icon: "/static/favicon-pending.svg",
    })
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const target = new URL(event.notification.data && event.notification.data.url || "/", self.location.origin);
  event.waitUntil((async () => {
    const tabs = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const tab of tabs) {
      const url = new URL(tab.url);
      if (url.origin === target.origin && url.pathname === target.pathname && "focus" in tab) {
        return tab.focus();
      }
    }
    return self.clients.openWindow(target.href);
  })());
});
