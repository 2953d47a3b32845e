"""Every catalogue translates every string, and the pages really switch language."""

import re
from pathlib import Path

import pytest

LOCALE = Path(__file__).resolve().parent.parent / "locale"


def entries(language: str) -> list[tuple[str, str, bool]]:
    text = (LOCALE / language / "LC_MESSAGES" / "django.po").read_text(encoding="utf-8")
    found = []
    for chunk in text.split("\n\n"):
        msgid = re.search(r'^msgid "(.*)"$', chunk, re.M)
        # A plural's first form stands for all (each has the same placeholders).
        msgstr = re.search(r'^msgstr(?:\[0\])? "(.*)"$', chunk, re.M)
        if msgid and msgid.group(1):
            found.append((msgid.group(1), msgstr.group(1) if msgstr else "", "fuzzy" in chunk))
    return found


@pytest.mark.parametrize("language", ["zh_Hans", "pt_BR", "en"])
def test_every_string_is_translated(language):
    catalogue = entries(language)
    assert len(catalogue) > 50
    untranslated = [msgid for msgid, msgstr, fuzzy in catalogue if not msgstr or fuzzy]
    assert untranslated == []


@pytest.mark.parametrize("language", ["zh_Hans", "pt_BR"])
def test_catalogues_cover_the_same_strings(language):
    assert {e[0] for e in entries(language)} == {e[0] for e in entries("en")}


@pytest.mark.parametrize("language", ["zh_Hans", "pt_BR"])
def test_placeholders_survive_translation(language):
    for msgid, msgstr, _ in entries(language):
        assert sorted(re.findall(r"%\(\w+\)s", msgid)) == sorted(
            re.findall(r"%\(\w+\)s", msgstr)
        ), msgid
