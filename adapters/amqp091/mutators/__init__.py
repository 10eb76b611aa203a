"""AMQP 0-9-1 mutation operators grouped by the broker events they reproduce (confirms and
refusals, dead-lettering, consumers, delivery limits, cuts inside a frame sequence). A plugin of its
own in the conformance.mutations entry-point group, loaded the way a third party's would be; its
modules build on the protocol module's helpers (adapters.amqp091.mutations: FieldRewriter,
DeliveryOperator, ...), never the other way round.
"""
from . import cuts  # noqa: F401
from . import limits  # noqa: F401
from . import dead_letter  # noqa: F401
from . import consumers  # noqa: F401
from . import confirms  # noqa: F401
from . import restored  # noqa: F401
from . import cancel  # noqa: F401
from . import soak  # noqa: F401  (scope "soak": the soak's own operators, never in the self-test)
