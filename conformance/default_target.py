"""The target of a command that names none: the selected adapter's own.

An adapter declares it as data (``Adapter.default_target``: a launcher name under
``conformance.targets``, ``NAME:ARG``, or a URL), checked when the adapter is loaded, so the core
names no adapter's broker: ``--adapter stomp`` alone launches what the STOMP package declares, not
the AMQP node that then answered STOMP frames with an AMQP header.
"""

from __future__ import annotations

import argparse
from importlib.metadata import entry_points
from typing import Any

from conformance.errors import UsageError
from conformance.targets import TARGET_GROUP

#: Without ``--adapter``: the URL scheme picks the adapter, and a run that names no target at all
#: gets a private RabbitMQ node (the bundled 0-9-1 and 1.0 adapters' own default).
WITHOUT_ADAPTER = "rabbitmq-local"


def check_declared(adapter: Any) -> None:
    """The adapter's ``default_target`` is None or names something installed: a typo in a
    third party's plugin is one line naming the plugin when it loads, not a failed launch later."""
    value = getattr(adapter, "default_target", None)
    name = getattr(adapter, "name", adapter)
    if value is None:
        return
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"adapter {name!r}: default_target must be a launcher name or a URL, not {value!r}")
    if "://" in value:
        return
    launcher = value.partition(":")[0]
    if not entry_points(group=TARGET_GROUP, name=launcher):
        installed = ", ".join(sorted(ep.name for ep in entry_points(group=TARGET_GROUP))) or "none"
        raise UsageError(f"adapter {name!r}: default_target {value!r} is no installed launcher; installed: {installed}")


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
