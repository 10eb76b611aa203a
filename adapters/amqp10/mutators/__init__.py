"""AMQP 1.0 mutation operators grouped by what they reproduce (outcomes, settlement, flow and
credit, link detach). The protocol's entry-point module (adapters.amqp10.mutations) imports this
package after its own operators, so these register the same way and may reuse its helpers.
"""
from . import links  # noqa: F401
