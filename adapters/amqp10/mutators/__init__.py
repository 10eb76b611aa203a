"""AMQP 1.0 mutation operators grouped by what they reproduce (outcomes, settlement, flow and
credit, link detach). A plugin of its own in the conformance.mutations entry-point group; its modules
build on the protocol module's helpers (adapters.amqp10.mutations), never the other way round.
"""
from . import links, ordering, spec_rules, transactions  # noqa: F401
