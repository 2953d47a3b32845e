"""Connecting a hosted MCP client with OAuth, as the person sees it in Chromium: the consent
page names the client, where it goes back to and what it may do; Allow sends the code back to
the client; Settings, Connected apps lists it, and Revoke ends it. Photographed at desktop and
phone width, light and dark, and checked with axe."""

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, choose_theme, log_in

CALLBACK = "http://127.0.0.1:8765/callback"
VERIFIER = "v" * 64


def register(server) -> str:
    response = httpx.post(
        f"{server.url}/oauth/register/",
        content=json.dumps(
            {
                "client_name": "Assistant",
                "redirect_uris": [CALLBACK],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }
        ),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text
    return response.json()["client_id"]


def authorize_path(server, client_id: str) -> str:
    challenge = hashlib.sha256(VERIFIER.encode()).digest()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "state": "s1",
        "code_challenge": base64.urlsafe_b64encode(challenge).rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "resource": f"{server.url}/mcp/",
    }
    return "/oauth/authorize/?" + urlencode(params)


def test_a_person_allows_a_client_sees_it_in_settings_and_revokes_it(
    open_page, parley_server, screenshots
):
    client_id = register(parley_server)
    # axe is injected for its scans only: this tab's CSP is bypassed.
    scanned = open_page(parley_server, bypass_csp=True)
    log_in(scanned)
    scanned.goto(authorize_path(parley_server, client_id))
    heading = scanned.get_by_role("heading", name="Let Assistant use Parley?", level=1)
    expect(heading).to_be_visible()
    consent = scanned.get_by_role("main")
    expect(consent).to_contain_text("may ask you questions and ask for your approval")
    expect(consent).to_contain_text("you go back to 127.0.0.1:8765")
    assert axe_violations(scanned) == []
    for width in (1280, 390):
        scanned.set_viewport_size({"width": width, "height": 800})
        for theme in ("Light", "Dark"):
            choose_theme(scanned, theme)
            scanned.screenshot(path=str(screenshots / f"oauth-consent-{width}-{theme.lower()}.png"))

    # Allow, by keyboard, in a tab whose CSP holds: the browser goes back to the client's
    # loopback listener with the code.
    page = open_page(parley_server)
    log_in(page)
    page.route(f"{CALLBACK}**", lambda route: route.fulfill(body="Connected."))
    page.goto(authorize_path(parley_server, client_id))
    page.get_by_role("button", name="Allow").focus()
    with page.expect_request(lambda request: request.url.startswith(CALLBACK)) as sent_back:
        page.keyboard.press("Enter")
    query = parse_qs(urlsplit(sent_back.value.url).query)
    assert query["state"] == ["s1"] and query["code"][0]
    expect(page.get_by_text("Connected.")).to_be_visible()
    # The client trades the code for its tokens.
    tokens = httpx.post(
        f"{parley_server.url}/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": VERIFIER,
            "resource": f"{parley_server.url}/mcp/",
        },
    )
    assert tokens.status_code == 200, tokens.text

    scanned.set_viewport_size({"width": 1280, "height": 800})
    scanned.goto("/settings/")
    more = scanned.get_by_role("region", name="More settings")
    more.get_by_role("link", name="Connected apps").click()
    apps = scanned.get_by_role("list", name="Your connected apps")
    expect(apps.get_by_role("listitem")).to_have_count(1)
    expect(apps).to_contain_text("Assistant")
    assert axe_violations(scanned) == []
    scanned.screenshot(path=str(screenshots / "connected-apps.png"))
    apps.get_by_role("button", name="Revoke Assistant").click()
    expect(scanned.get_by_text("No connected apps.")).to_be_visible()
