"""What a person does on Parley's pages, shared by the browser tests."""

from playwright.sync_api import expect


def log_in(page, username="demo", password="demo"):
    page.goto("/")
    page.get_by_role("textbox", name="Username").fill(username)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Conversations")).to_be_visible()


def new_conversation(page):
    page.get_by_role("button", name="New conversation").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


def transcript_items(page):
    return page.get_by_role("list", name="Transcript").get_by_role("listitem")


def send(page, text):
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")
