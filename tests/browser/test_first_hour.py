"""The first hour: the settings page and the header's user menu, a phone's width with long
unbroken titles and messages, and a console that stays clean (no CSP violation, no htmx error
on an aborted search)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.pages import axe_violations, choose_theme, log_in, poll, user_menu
from tests.live_server import wait_for

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LONG_WORD = "Unbroken" + "x" * 292  # 300 characters, no place to break
LONG_URL = "https://example.com/" + "a" * 280

# A conversation of demo's titled with one 300-character word, whose messages are such a word
# and a long URL; prints its id.
MAKE_CONVERSATION = f"""
from django.contrib.auth.models import User
from django.db import transaction
from chat.blocks import TextBlock
from chat.models import Conversation, Role
from chat.transcript import Transcript, lock
conversation = Conversation.objects.create(
    owner=User.objects.get(username="demo"), title="{LONG_WORD}"
)
with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
    transcript.append(role=Role.USER, blocks=[TextBlock(text="{LONG_WORD}")])
    transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text="{LONG_URL} {LONG_WORD}")])
    transcript.append(role=Role.ASSISTANT, blocks=[TextBlock(text="The last words of all")])
print(conversation.pk)
"""


# Counts the searches the sidebar's box asks for from now on: htmx fires htmx:confirm as a
# request is due, just before it sends, queues or aborts it (hx-sync).
COUNT_SEARCHES = """() => {
  window.__searches = 0;
  document.addEventListener("htmx:confirm", (event) => {
    if (event.detail.elt.matches("form[role=search]")) { window.__searches += 1; }
  });
}"""


def long_conversation(server) -> int:
    return int(server.manage("shell", "--no-imports", "-c", MAKE_CONVERSATION).split()[-1])


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_nothing_scrolls_sideways_on_a_phone_and_the_composer_hides_no_text(
    open_page, parley_server
):
    conversation_id = long_conversation(parley_server)
    page = open_page(parley_server, **PHONE)
    log_in(page)
    assert page_width(page) <= 390, "home"
    page.goto(f"/c/{conversation_id}/")
    expect(page.get_by_role("heading", name=LONG_WORD)).to_be_visible()
    assert page_width(page) <= 390, "conversation"

    # The header is one row: the brand, Questions and the user menu side by side.
    banner = page.get_by_role("banner")
    row = [
        banner.get_by_role("link", name="Parley"),
        banner.get_by_role("link", name="Questions"),
        banner.get_by_role("button", name="demo"),
    ]
    middles = [box["y"] + box["height"] / 2 for box in (item.bounding_box() for item in row)]
    assert max(middles) - min(middles) < 8, middles

    # Scrolled to the end, the last message is above the sticky composer, not under it.
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    last = page.get_by_text("The last words of all")
    composer = page.get_by_role("textbox", name="Message")
    expect(last).to_be_in_viewport()
    composer_top = page.locator("#composer").bounding_box()["y"]
    assert last.bounding_box()["y"] + last.bounding_box()["height"] <= composer_top
    assert composer.bounding_box()["y"] >= composer_top

    user_menu(page).get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    assert page_width(page) <= 390, "settings"


def test_the_console_stays_clean_on_every_page_and_when_a_search_is_cut_short(
    page, parley_server, console_errors
):
    """The `page` fixture fails on any console error: a CSP violation, an htmx error."""
    conversation_id = long_conversation(parley_server)
    # A page that is not there says so in the console, as every 404 does; nothing else may.
    console_errors.expect("404 (Not Found)")
    page.goto("/login/")
    log_in(page)
    for path in (
        "/",
        f"/c/{conversation_id}/",
        "/questions/",
        "/settings/",
        "/settings/tokens/",
        "/settings/webhooks/",
        "/settings/tools/",
        "/c/999999/",
    ):
        page.goto(path)
        page.wait_for_load_state("networkidle")
    assert console_errors.unexpected() == []

    # Searches are held by the network until the test lets them go. Typing on while one runs
    # must not abort it (htmx logs an abort as an error), and neither may leaving the page.
    held = []
    page.route(re.compile(r"/conversations/search/"), lambda route: held.append(route))
    page.goto(f"/c/{conversation_id}/")
    search = page.get_by_role("searchbox", name="Search")
    search.press_sequentially("Unbr")
    poll(page, "0", lambda _: held, timeout=5)
    assert len(held) == 1
    page.evaluate(COUNT_SEARCHES)
    search.press_sequentially("oken")
    # Past the box's 250 ms pause the second search is due while the first still runs: htmx
    # asks (htmx:confirm), then queues it at once, where aborting the first would log an error.
    poll(page, "window.__searches", bool, timeout=5)
    assert console_errors.unexpected() == []
    held.pop().continue_()
    poll(page, "0", lambda _: held, timeout=5)
    held.pop().continue_()
    expect(page.get_by_role("status").filter(has_text=re.compile(r"Found: \d+"))).to_be_visible()
    search.press_sequentially(" at all")
    poll(page, "0", lambda _: held, timeout=5)
    page.get_by_role("link", name=re.compile("^Questions")).click()
    expect(page).to_have_url(re.compile(r"/questions/$"))
    page.unroute_all(behavior="ignoreErrors")
    assert console_errors.unexpected() == []


def expire_after(server) -> int | None:
    rows = server.query(
        "SELECT question_expire_after FROM accounts_preferences p JOIN auth_user u "
        "ON u.id = p.user_id WHERE u.username = %s",
        "demo",
    )
    return rows[0][0]


@pytest.fixture
def fresh_preferences(parley_server):
    """The demo user's preferences as a new account has them: the browser tests share one
    server, and another test may have left a theme or a switch changed."""
    parley_server.execute(
        "DELETE FROM accounts_preferences WHERE user_id = "
        "(SELECT id FROM auth_user WHERE username = %s)",
        "demo",
    )


def saved(page, text="Settings saved."):
    """The page's status says the last change was saved (each change saves as it is made),
    then is cleared for the next one."""
    status = page.locator("#settings-status")
    expect(status).to_have_text(text)
    status.evaluate("el => { el.textContent = ''; }")


def test_settings_save_as_they_change_with_the_theme_language_switches_and_deadline_picker(
    page, parley_server, console_errors, fresh_preferences
):
    console_errors.expect("400 (Bad Request)")  # the refused custom deadline, on purpose
    log_in(page)
    # The header: the brand, Questions and the user menu; no theme or language outside it.
    banner = page.get_by_role("banner")
    expect(banner.get_by_role("combobox")).to_have_count(0)
    expect(banner.get_by_role("group", name="Theme")).to_be_hidden()
    menu = user_menu(page)
    expect(menu.get_by_role("button", name="Log out")).to_be_visible()
    menu.get_by_role("link", name="Settings").click()

    for section in (
        "Appearance",
        "Language",
        "Notifications",
        "Questions",
        "Sessions and tokens",
        "Connect an agent",
        "More settings",
    ):
        expect(page.get_by_role("heading", name=section, level=2, exact=True)).to_be_visible()
    more = page.get_by_role("region", name="More settings")
    for link in ("API tokens", "Webhooks", "Tools"):
        expect(more.get_by_role("link", name=link)).to_be_visible()
    # One save model: every control saves as it changes, so there is no Save button.
    expect(page.get_by_role("button", name="Save settings")).to_be_hidden()

    # On/off settings are switches, saved as they are flipped; focus stays on the switch.
    switch = page.get_by_role("switch", name="Browser notifications")
    expect(switch).not_to_be_checked()
    switch.check()
    saved(page)
    expect(page.get_by_role("switch", name="Browser notifications")).to_be_focused()
    page.reload()
    expect(page.get_by_role("switch", name="Browser notifications")).to_be_checked()

    # The deadline picker: presets, and a custom number of minutes, stored in seconds. Custom…
    # waits for its minutes (focus goes there), which save as they are entered.
    picker = page.get_by_role("group", name="Questions expire after")
    for choice in ("Never", "15 minutes", "1 hour", "1 day", "Custom…"):
        expect(picker.get_by_role("radio", name=choice)).to_be_visible()
    minutes = picker.get_by_role("spinbutton", name="Minutes")
    expect(minutes).to_be_hidden()
    picker.get_by_role("radio", name="Custom…").check()
    expect(minutes).to_be_focused()
    minutes.fill("90")
    minutes.press("Tab")
    saved(page)
    assert expire_after(parley_server) == 90 * 60
    page.reload()
    expect(picker.get_by_role("radio", name="Custom…")).to_be_checked()
    expect(minutes).to_have_value("90")

    # A custom deadline without its minutes is refused, and said where they go.
    minutes.fill("")
    minutes.press("Tab")
    saved(page, "Not saved: correct the field marked above.")
    expect(page.get_by_role("alert")).to_contain_text("Enter a number of minutes.")
    expect(minutes).to_have_attribute("aria-invalid", "true")
    assert expire_after(parley_server) == 90 * 60
    picker.get_by_role("radio", name="1 hour").check()
    saved(page)
    expect(page.get_by_role("alert")).to_have_count(0)
    assert expire_after(parley_server) == 3600
    picker.get_by_role("radio", name="Never").check()
    saved(page)
    page.get_by_role("switch", name="Browser notifications").uncheck()
    saved(page)
    assert expire_after(parley_server) == 0

    # The theme and the language are settings too: the page follows at once.
    page.get_by_role("group", name="Theme").get_by_role("radio", name="Dark").check()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    saved(page)
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    page.get_by_role("combobox", name="Language of Parley’s pages").select_option("pt-br")
    expect(page.get_by_role("heading", name="Configurações", level=1)).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="Configurações salvas.")).to_be_visible()
    page.get_by_role("group", name="Tema").get_by_role("radio", name="Seguir o sistema").check()
    saved(page, "Configurações salvas.")
    page.get_by_role("combobox", name="Idioma das páginas do Parley").select_option("en")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("html")).to_have_attribute("data-theme", "system")

    # Log out is in the menu too.
    user_menu(page).get_by_role("button", name="Log out").click()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()


def test_a_setting_changed_while_the_last_one_saves_is_saved_too_without_leaving_the_page(
    page, parley_server, fresh_preferences
):
    def stored():
        return parley_server.query(
            "SELECT theme, email_questions FROM accounts_preferences p JOIN auth_user u "
            "ON u.id = p.user_id WHERE u.username = %s",
            "demo",
        )

    log_in(page)
    page.goto("/settings/")
    page.evaluate("window.stillHere = true")
    # The first save is held on its way; Dark is chosen meanwhile.
    held = []
    page.route("**/settings/", lambda route: route.continue_() if held else held.append(route))
    page.get_by_role("switch", name="Email me questions").check()
    while not held:
        page.wait_for_timeout(20)  # lets Playwright hand over the held request
    page.get_by_role("group", name="Theme").get_by_role("radio", name="Dark").check()
    held[0].continue_()
    page.unroute("**/settings/")
    wait_for(lambda: stored() == [("dark", True)], 10, "both changes saved")
    expect(page.get_by_role("radio", name="Dark")).to_be_checked()
    expect(page.get_by_role("switch", name="Email me questions")).to_be_checked()
    # A change in the instant the saved form arrives is saved as well, not by a reload.
    page.evaluate(
        """() => {
          const status = document.getElementById("settings-status");
          new MutationObserver(() => {
            if (status.textContent && !window.changedAtOnce) {
              window.changedAtOnce = true;
              document.querySelector('input[name="theme"][value="light"]').click();
            }
          }).observe(status, {childList: true, characterData: true, subtree: true});
        }"""
    )
    page.get_by_role("switch", name="Email me questions").uncheck()
    wait_for(lambda: stored() == [("light", False)], 10, "both changes saved")
    assert page.evaluate("window.stillHere") is True
    expect(page.locator(".flash")).to_have_count(0)
    expect(page.get_by_role("radio", name="Light")).to_be_checked()


def test_the_user_menu_opens_and_closes_by_keyboard(page):
    log_in(page)
    button = page.get_by_role("banner").get_by_role("button", name="demo", exact=True)
    button.focus()
    page.keyboard.press("Enter")
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("link", name="Settings")).to_be_focused()
    page.keyboard.press("Escape")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(button).to_be_focused()
    expect(page.get_by_role("link", name="Settings")).to_be_hidden()


@pytest.mark.parametrize("width", [1280, 390])
def test_settings_and_the_header_pass_axe_in_both_themes_and_are_photographed(
    open_page, parley_server, screenshots, width
):
    # axe is injected for the scan only: the page's CSP allows no inline script.
    page = open_page(parley_server, bypass_csp=True, viewport={"width": width, "height": 900})
    log_in(page)
    page.goto("/settings/")
    suffix = "-phone" if width == 390 else ""
    for theme in ("Light", "Dark"):
        choose_theme(page, theme)
        # The page's own theme choice follows the menu's (saving the form keeps it).
        expect(page.get_by_role("radio", name=theme)).to_be_checked()
        assert axe_violations(page) == [], theme
        assert page_width(page) <= width, theme
        # The whole page in one picture, tall enough that the sticky header stays at its top.
        page.set_viewport_size({"width": width, "height": 2800})
        page.screenshot(path=screenshots / f"settings-{theme.lower()}{suffix}.png")
        page.set_viewport_size({"width": width, "height": 900})
        user_menu(page)
        assert axe_violations(page) == [], f"{theme}, menu open"
        page.screenshot(path=screenshots / f"header-menu-{theme.lower()}{suffix}.png")
        page.keyboard.press("Escape")
    choose_theme(page, "System")
