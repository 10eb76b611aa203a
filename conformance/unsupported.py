"""The three meanings of an ``unsupported`` verdict, and how each is shown.

``unsupported`` never stands for a broker that misbehaved: it says that the case could not put its
requirement to the broker, for one of three reasons only, and the record names which
(``unsupported_kind``). Anything else a broker does is judged: pass, fail, or a documented deviation.
"""

from __future__ import annotations

from typing import Any

#: The adapter or the protocol cannot express the requirement (e.g. basic.recover over AMQP 1.0).
CANNOT_EXPRESS = "cannot-express"
#: The broker refused an optional feature cleanly, in the protocol's own way; the refusal (reply
#: code and text, or AMQP 1.0 error condition) is recorded in ``observed``.
REFUSED = "refused"
#: The target cannot take the fault the case needs (an external URL cannot be restarted, one node
#: cannot fail over).
NO_FAULT = "no-fault"

KINDS: dict[str, str] = {
    CANNOT_EXPRESS: "the adapter or the protocol cannot express the requirement",
    REFUSED: "the broker refused an optional feature cleanly, in the protocol's own way (the refusal is recorded)",
    NO_FAULT: "the target cannot take the fault the case needs",
}


def check_kind(kind: str, where: str) -> str:
    """``kind`` if it is one of :data:`KINDS`, else a ValueError naming ``where``."""
    if kind not in KINDS:
        raise ValueError(f"{where}: unsupported kind {kind!r}; one of {', '.join(KINDS)}")
    return kind


def label(record: dict[str, Any]) -> str:
    """The verdict as outputs show it: ``unsupported (refused)`` for an unsupported record with a kind."""
    verdict = str(record.get("verdict", "?"))
    kind = record.get("unsupported_kind")
    return f"{verdict} ({kind})" if verdict == "unsupported" and kind else verdict


def tally(records: list[dict[str, Any]]) -> str:
    """``unsupported: 3 cannot-express, 1 refused``: the kinds of a run's unsupported records ("" if none)."""
    counts = {k: 0 for k in (*KINDS, None)}
    for r in records:
        if r.get("verdict") == "unsupported":
            k = r.get("unsupported_kind")
            counts[k if k in KINDS else None] += 1
    parts = [f"{n} {k or 'of no recorded kind'}" for k, n in counts.items() if n]
    return f"unsupported: {', '.join(parts)}" if parts else ""
