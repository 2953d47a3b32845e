"""Secrets kept at rest (another service's tokens, a client secret it issued): sealed with
Fernet (AES-128-CBC and HMAC-SHA256, from `cryptography`) under a key derived from SECRET_KEY.

A key in SECRET_KEY_FALLBACKS still opens what it sealed, so SECRET_KEY can be rotated the way
Django rotates it for sessions and signatures; what is sealed again uses the new key. Losing
every key that sealed a value loses the value: `unseal` raises `Unreadable`, and the caller
treats the secret as gone (a person signs in again)."""

import base64
import json
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

# Binds the derived key to this use: a SECRET_KEY's other uses never see it.
PURPOSE = b"parley sealed secrets v1"


class Unreadable(Exception):
    """No key of this deployment opens the value (the keys changed, or it was altered)."""


def _fernet(secret: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=PURPOSE).derive(
        secret.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


@cache
def _keys(secret: str, fallbacks: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([_fernet(secret), *(_fernet(old) for old in fallbacks)])


def _current() -> MultiFernet:
    return _keys(settings.SECRET_KEY, tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ())))


def seal(value: dict) -> str:
    """`value` (JSON) sealed under the current key, as text."""
    return _current().encrypt(json.dumps(value, separators=(",", ":")).encode()).decode()


def unseal(token: str) -> dict:
    """What `seal` sealed, under the current key or a fallback."""
    try:
        return json.loads(_current().decrypt(token.encode()))
    except (InvalidToken, ValueError) as error:
        raise Unreadable from error
