"""Settings' "Notify this browser" in real Chromium against the real server.

Chromium offers no Push API in Playwright's browser contexts (they are incognito: "Chrome
currently does not support the Push API in incognito mode"), and has no push service to
reach here. So the page's PushManager is replaced by a stand-in whose subscription is the
one a local push service (tests.fakes.PushService) gives; everything else is real: the
service worker registered at the site's root, the notification permission, the switch, what
the server stores and deletes, and Chromium's own refusal, which the page explains."""

import json

import pytest
from playwright.sync_api import expect

from tests.browser.pages import log_in
from tests.fakes import PushService

VAPID_PUBLIC_KEY = (
    "BPkZpnTEEZMprS4867e1uWIthRDNcYZYyBQ_qgkLfmbzzrXN6w9nDnHwUBvMJvtL8RBq6JD7tYUU95AHnxeOyqQ"
)
VAPID_PRIVATE_KEY = "waDK-puJ6Eqg35V6SqnU1znH7GGXkBDYdNslT7pgtqI"

# The stand-in: subscribe() remembers the key it was given and answers with the local push
# service's subscription, kept (as a browser keeps it) until unsubscribe().
FAKE_PUSH_MANAGER = """
(() => {
  const given = %s;
  const subscription = {
    endpoint: given.endpoint,
    toJSON: () => given,
    unsubscribe: async () => { localStorage.removeItem("subscribed"); return true; },
  };
  PushManager.prototype.getSubscription = async function () {
    return localStorage.getItem("subscribed") ? subscription : null;
  };
  PushManager.prototype.subscribe = async function (options) {
    const key = new Uint8Array(options.applicationServerKey);
    localStorage.setItem("subscribed", btoa(String.fromCharCode(...key)));
    return subscription;
  };
})();
"""


@pytest.fixture
def push_server(start_server):
    return start_server(
        VAPID_PUBLIC_KEY=VAPID_PUBLIC_KEY,
        VAPID_PRIVATE_KEY=VAPID_PRIVATE_KEY,
        # The local push service: loopback, allowed as an operator allows theirs.
        WEBHOOK_ALLOW_PRIVATE_NETWORKS="true",
        PUSH_SERVICE_HOSTS="127.0.0.1",
    )


@pytest.fixture
def push_service():
    service = PushService(VAPID_PUBLIC_KEY)
    yield service
    service.close()


def test_chromium_refusing_push_is_explained_and_the_switch_stays_off(push_server, open_page):
    page = open_page(push_server)
    page.context.grant_permissions(["notifications"], origin=push_server.url)
    log_in(page)
    page.goto("/settings/")
    switch = page.get_by_role("switch", name="Notify this browser")
    expect(switch).to_be_enabled()
    switch.click()
    expect(page.get_by_role("status").filter(has_text="could not be subscribed")).to_have_text(
        "This browser could not be subscribed. Try again later."
    )
    expect(switch).not_to_be_checked()
    assert push_server.query("SELECT count(*) FROM reach_pushsubscription") == [(0,)]


def test_the_switch_subscribes_this_browser_and_off_forgets_it(
    push_server, push_service, open_page
):
    page = open_page(push_server)
    page.add_init_script(FAKE_PUSH_MANAGER % json.dumps(push_service.subscription))
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    log_in(page)
    page.goto("/settings/")
    switch = page.get_by_role("switch", name="Notify this browser")
    expect(switch).to_be_enabled()
    expect(switch).not_to_be_checked()
    expect(page.get_by_text("This browser is not notified.")).to_be_visible()

    # Notifications blocked: the switch says so and stays off.
    page.context.clear_permissions()
    switch.click()
    expect(page.get_by_text("Notifications are blocked for Parley")).to_be_visible()
    expect(switch).not_to_be_checked()

    page.context.grant_permissions(["notifications"], origin=push_server.url)
    switch.click()
    expect(
        page.get_by_text(
            "This browser is notified when a question waits and no Parley page is open."
        )
    ).to_be_visible()
    expect(switch).to_be_checked()
    scope = page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
    assert scope == f"{push_server.url}/"
    key = page.evaluate("localStorage.getItem('subscribed')")
    assert key.rstrip("=").replace("+", "-").replace("/", "_") == VAPID_PUBLIC_KEY
    assert push_server.query("SELECT endpoint, p256dh, auth FROM reach_pushsubscription") == [
        (push_service.url, push_service.keys["p256dh"], push_service.keys["auth"])
    ]

    page.reload()  # the switch reads this browser's subscription
    expect(page.get_by_role("switch", name="Notify this browser")).to_be_checked()
    page.get_by_role("switch", name="Notify this browser").click()
    expect(page.get_by_text("This browser is not notified.")).to_be_visible()
    assert push_server.query("SELECT count(*) FROM reach_pushsubscription") == [(0,)]
    assert errors == []


def test_a_push_service_the_server_does_not_send_to_is_refused_and_the_page_says_why(
    push_server, push_service, open_page
):
    """A browser whose push service is not among PUSH_SERVICE_HOSTS is told so at once, when
    the switch is turned on, not left to fail silently at the first push."""
    elsewhere = {**push_service.subscription, "endpoint": "https://push.example.net/x"}
    page = open_page(push_server)
    page.add_init_script(FAKE_PUSH_MANAGER % json.dumps(elsewhere))
    page.context.grant_permissions(["notifications"], origin=push_server.url)
    log_in(page)
    page.goto("/settings/")
    switch = page.get_by_role("switch", name="Notify this browser")
    expect(switch).to_be_enabled()
    switch.click()
    expect(page.get_by_role("status").filter(has_text="push service")).to_have_text(
        "Parley does not send notifications to this browser’s push service. An administrator "
        "can allow it."
    )
    expect(switch).not_to_be_checked()
    assert push_server.query("SELECT count(*) FROM reach_pushsubscription") == [(0,)]
