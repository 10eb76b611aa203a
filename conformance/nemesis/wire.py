"""Wire framing: splitting a byte stream into protocol frames and naming them.

The fault proxy needs frame boundaries (to fire a fault on exactly one frame and to forward whole
frames only) and readable names (for triggers and traces). Naming is cheap and done for every frame;
the full decode of a frame's fields happens only when a trace is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol


class MalformedFrame(ValueError):
    """The stream is not valid framing for the protocol (garbage, impossible size, bad frame end)."""


@dataclass(slots=True)
class Frame:
    #: The frame's bytes exactly as received (forwarded unchanged).
    raw: bytes
    #: Protocol name: "basic.deliver", "content-body", "heartbeat", "transfer", "protocol-header", ...
    name: str
    channel: int
    #: Renders the frame's key fields on demand (traces only); secrets are never rendered.
    describe: Callable[[bytes], str] | None = None

    def detail(self) -> str:
        if self.describe is None:
            return ""
        try:
            return self.describe(self.raw)
        except Exception as exc:  # a frame the codec cannot decode is still forwarded
            return f"<undecodable: {exc}>"


class Codec(Protocol):
    """Incremental frame splitter for one direction of one connection."""

    #: The protocol's name as result records spell it ("amqp-0-9-1", "amqp-1.0").
    protocol: str
    #: Every frame name :meth:`feed` can give (a fault naming another can never fire on this
    #: protocol); a codec that cannot list them leaves this empty and nothing is checked.
    frame_names: frozenset[str]

    def feed(self, data: bytes) -> list[Frame]:
        """Append ``data``; return every frame now complete. Raises MalformedFrame on bad framing."""

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (non-zero at EOF means a truncated frame)."""


class BufferedCodec:
    """Holds the bytes of a frame that has not fully arrived yet."""

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        return len(self._buf)


#: Entry-point group of framers: a Codec class with ``matches(first_bytes) -> bool``. The AMQP codecs
#: register here too (adapters/amqp091/wire.py, adapters/amqp10/wire.py): the core names no protocol.
WIRE_GROUP = "conformance.wire"


def codec_for_any(first: bytes) -> type[Codec] | None:
    """The codec of the first installed framer that recognises a client's first bytes, or None."""
    from conformance.plugins import load_group

    for codec in load_group(WIRE_GROUP).values():
        if codec.matches(first):
            return codec  # type: ignore[no-any-return]
    return None


def frame_names(protocol: str) -> frozenset[str]:
    """The frame names the installed codec of ``protocol`` gives (empty: unknown, not checked)."""
    from conformance.plugins import load_group

    for codec in load_group(WIRE_GROUP).values():
        if getattr(codec, "protocol", None) == protocol:
            return frozenset(getattr(codec, "frame_names", ()) or ())
    return frozenset()
