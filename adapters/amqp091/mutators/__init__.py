"""AMQP 0-9-1 mutation operators grouped by the broker events they reproduce (confirms and
refusals, dead-lettering, consumers, delivery limits, cuts inside a frame sequence). The protocol's
entry-point module (adapters.amqp091.mutations) imports this package after its own operators, so
these register the same way and may reuse its helpers (FieldRewriter, DeliveryOperator, ...).
"""
from . import cuts  # noqa: F401
from . import limits  # noqa: F401
from . import consumers  # noqa: F401
from . import dead_letter  # noqa: F401
from . import confirms  # noqa: F401
