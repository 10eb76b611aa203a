"""The target of a command that names none: the selected adapter's own.

An adapter declares it as data (``Adapter.default_target``: a launcher name under
``conformance.targets``, ``NAME:ARG``, or a URL), checked when the adapter is loaded
(:func:`conformance.api.check_declared`), so the core names no adapter's broker: ``--adapter stomp``
alone launches what the STOMP package declares, not the AMQP node that then answered STOMP frames
with an AMQP header.
"""

from __future__ import annotations

import argparse

from conformance.errors import UsageError

#: Without ``--adapter``: the URL scheme picks the adapter, and a run that names no target at all
#: gets a private RabbitMQ node (the bundled 0-9-1 and 1.0 adapters' own default).
WITHOUT_ADAPTER = "rabbitmq-local"


def resolve(args: argparse.Namespace) -> None:
    """Set ``args.target`` when the command takes one and the user gave none."""
    if getattr(args, "target", "") is not None:
        return
    chosen = getattr(args, "adapter", None)
    if not chosen:
        args.target = WITHOUT_ADAPTER
        return
    from conformance.api import adapter_for

    adapter = adapter_for("", chosen)  # loads and checks the plugin, its default_target included
    if adapter.default_target is None:
        schemes = "/".join(adapter.schemes) or "its scheme"
        raise UsageError(f"adapter {chosen!r} declares no default target: give --target, a {schemes}:// URL or a launcher name")
    args.target = adapter.default_target
