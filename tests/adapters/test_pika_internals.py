"""The pika adapter reaches into pika's private attributes where pika's public API cannot express an
operation (a broker-named consumer tag, publishes pipelined under confirms). A pika release that
drops one must be noticed here, on install, not as an Unsupported verdict in users' runs."""

from __future__ import annotations

import pika.adapters.blocking_connection as blocking
from pika.channel import Channel

from adapters.amqp091 import pika_adapter
from conformance.errors import Unsupported


def test_the_installed_pika_has_every_internal_the_adapter_uses() -> None:
    assert hasattr(blocking, "_ConsumerInfo")
    for name in ("_consumer_infos", "_basic_consume_ok_result", "_flush_output", "_on_consumer_message_delivery"):
        assert name in vars(blocking.BlockingChannel) or name in blocking.BlockingChannel.__init__.__code__.co_names, name
    for name in ("_rpc", "_consumers", "_consumers_with_noack"):
        assert name in vars(Channel) or name in Channel.__init__.__code__.co_names, name


def test_a_missing_internal_is_unsupported_naming_it() -> None:
    class Bare:
        pass

    try:
        pika_adapter._internals("a broker-named consumer tag", (Bare(), "_rpc"))
    except Unsupported as exc:
        assert "_rpc" in str(exc) and "broker-named consumer tag" in str(exc)
    else:
        raise AssertionError("a missing internal must be Unsupported")
