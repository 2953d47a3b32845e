"""Which SECRET_KEY a production process (DEBUG off) may sign with: one that Django's
deployment check security.W009 accepts (at least 50 characters, at least 5 different ones,
not a key Django generated for development), and none of the placeholders that Parley's docs
and examples show or that Parley falls back to under DEBUG."""

MIN_LENGTH = 50
MIN_DIFFERENT = 5
# Lowercase; a key that starts with one is that placeholder, whatever follows (a comment
# copied with it, say).
PLACEHOLDERS = (
    "change-me",  # docs/operators/production.md, deploy/parley.env.example
    "...",  # docs/operators/deploying.md
    "parley-insecure-development-key-do-not-deploy",  # config/settings.py under DEBUG
    "django-insecure-",  # what Django's startproject writes (security.W009)
)
HOW = (
    f"set it to at least {MIN_LENGTH} random characters, the same in every process, such as "
    'the output of: python -c "import secrets; print(secrets.token_urlsafe(50))"'
)


def weakness(key: str) -> str | None:
    """Why `key` must not sign a production process's sessions and links, naming the setting
    but never the key itself; None if it may."""
    seen = key.strip().lower()
    for placeholder in PLACEHOLDERS:
        if seen.startswith(placeholder):
            return f"SECRET_KEY is a placeholder ({placeholder}…): {HOW}."
    if len(key) < MIN_LENGTH:
        return f"SECRET_KEY has {len(key)} characters: {HOW}."
    if len(set(key)) < MIN_DIFFERENT:
        return f"SECRET_KEY has {len(set(key))} different characters: {HOW}."
    return None
