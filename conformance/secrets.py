"""Credentials: the one redaction point every output of the suite passes through.

Two layers, because one is never enough for a tool whose failures print tracebacks:

- **Structural.** A target URL travels as :class:`SecretUrl`, a ``str`` whose ``repr`` is redacted,
  so the argument lists and locals that pytest, ``dataclasses`` and ``logging`` print never show the
  password. (``str()`` stays the real value: client libraries need it to log in.)
- **One scrub.** Every secret the process learns (a URL's password, a launched node's password) is
  registered here; :func:`scrub` replaces each of them in any text, and every writer (results,
  run.json, the console reports, JUnit, Allure, wire traces, the self-test's logs) calls it before
  the text leaves the process. A child process registers the secrets of the URL it is given.
"""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"
#: Shorter secrets are masked only where they appear as a URL's password (":pw@"): masking a
#: two-letter word everywhere would make every text unreadable.
MIN_BARE_LENGTH = 4

_lock = threading.Lock()
_secrets: set[str] = set()


def register(secret: str | None) -> None:
    """Remember a secret (and its percent-encoded forms) so that :func:`scrub` hides it."""
    if not secret:
        return
    with _lock:
        for form in {secret, quote(secret, safe=""), quote(secret), unquote(secret)}:
            if form:
                _secrets.add(form)


def register_url(url: str | None) -> None:
    """Register the password of a URL (if it has one)."""
    if not url:
        return
    try:
        password = urlsplit(str(url)).password
    except ValueError:
        return
    register(password)


def registered() -> frozenset[str]:
    with _lock:
        return frozenset(_secrets)


def redact(url: str) -> str:
    """The URL with any password replaced, for logs and reports."""
    try:
        parts = urlsplit(str(url))
        password = parts.password
    except ValueError:
        return "<unparseable url>"
    if password is None:
        return str(url)
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{netloc}"))


def scrub(text: str) -> str:
    """``text`` with every registered secret masked (longest first, so no fragment survives)."""
    if not text:
        return text
    for secret in sorted(registered(), key=len, reverse=True):
        if secret not in text:
            continue
        if len(secret) >= MIN_BARE_LENGTH:
            text = text.replace(secret, MASK)
        else:
            text = text.replace(f":{secret}@", f":{MASK}@")
    return text


def scrub_in_place(value: Any, _seen: set[int] | None = None) -> Any:
    """``value`` with every string in it scrubbed, each container and object keeping its type.

    For structures a library reads back by type, such as a pytest report's ``longrepr``: a skip's
    ``(path, lineno, message)`` tuple stays a tuple (JUnit asserts it), a traceback's repr objects
    keep their class. Lists, dicts and objects are changed in place; tuples and strings are rebuilt."""
    seen = set() if _seen is None else _seen
    if isinstance(value, str):
        return scrub(value)
    if id(value) in seen or isinstance(value, (bytes, int, float, bool, type(None))):
        return value
    seen.add(id(value))
    if isinstance(value, tuple):
        items = [scrub_in_place(v, seen) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, list):
        value[:] = [scrub_in_place(v, seen) for v in value]
    elif isinstance(value, dict):
        items = [(scrub_in_place(k, seen), scrub_in_place(v, seen)) for k, v in value.items()]
        value.clear()
        value.update(items)
    elif hasattr(value, "__dict__"):
        for name, attr in list(vars(value).items()):
            setattr(value, name, scrub_in_place(attr, seen))
    return value


def scrub_bytes(data: bytes) -> bytes:
    try:
        return scrub(data.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        return data


def scrub_obj(value: Any) -> Any:
    """A JSON-able value with every string in it scrubbed (records, run metadata)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_obj(k): scrub_obj(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_obj(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` through the redaction point (for every JSON the suite writes)."""
    return scrub(json.dumps(value, default=str, **kwargs))


class SecretUrl(str):
    """A target URL that never shows its password when printed as an object.

    ``repr()`` (what tracebacks, dataclass reprs and ``%r`` show) is redacted; :attr:`redacted` is the
    form for humans. Creating one registers the password with the redaction point.
    """

    def __new__(cls, value: str) -> "SecretUrl":
        obj = super().__new__(cls, value)
        register_url(value)
        return obj

    @property
    def redacted(self) -> str:
        return redact(str.__str__(self))

    def __repr__(self) -> str:
        return repr(self.redacted)

    def reveal(self) -> str:
        """The plain string, for the client library that logs in with it."""
        return str.__str__(self)

    def with_query(self, params: dict[str, object]) -> "SecretUrl":
        """This URL with ``params`` added to its query string, still redacted when printed (a plain
        ``+`` or f-string would make a str whose repr shows the password)."""
        parts = urlsplit(self.reveal())
        extra = "&".join(f"{quote(k)}={quote(str(v))}" for k, v in params.items())
        return SecretUrl(urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra)))
