"""Liveness: after a wait expired, is it this case's broker behaviour or has the target stopped answering?

A TCP probe cannot tell: a broker that stopped answering after a channel error still accepts
connections. So after a scenario ends in a timeout, :func:`health_probe` opens a fresh connection,
declares a queue and makes one round trip, each with a short deadline. If that works the target is
alive: a missing delivery is an observation a verdict judges (conformance.runner.missing_deliveries) and any
other timeout stays this case's error. If it does not, the run records "target stopped answering
<operation> since <case id>" and every remaining case ends at once with that text instead of
running to its deadline (the pytest plugin calls :func:`after_scenario_exception`).
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass

from conformance.api import Adapter, QueueSpec
from conformance.errors import ConformanceError, ConnectionLost, DeliveriesMissing, NoReply, OperationTimeout, Unsupported
from conformance.kit.verdicts import Outcome, Verdict
from conformance.runner.missing_deliveries import missing_obs, missing_verdict

#: Deadline of each step of the health probe. A broker that answered the case's own operations in
#: milliseconds and cannot open a connection, declare and round-trip within this is not answering.
PROBE_TIMEOUT_S = 5.0


def operation_of(exc: BaseException) -> str:
    """The operation an exception says did not complete, in protocol terms."""
    if isinstance(exc, NoReply):
        return exc.operation
    if isinstance(exc, DeliveriesMissing):
        return f"delivery from {exc.queue}"
    if isinstance(exc, OperationTimeout):
        return str(exc)
    return type(exc).__name__


def health_probe(adapter: Adapter, url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the target answers a fresh connection, a queue.declare and a round trip within
    ``timeout`` each; otherwise what did not answer ("queue.declare: no queue.declare-ok within 5s")."""
    conn = None
    try:
        conn = adapter.connect(url, timeout=timeout, name="conformance health probe", op_timeout=timeout)
        session = conn.session()
        name = f"conformance.probe.{uuid.uuid4().hex[:8]}"
        try:
            session.declare_queue(QueueSpec(name=name, queue_type="classic", durable=False, exclusive=True, auto_delete=True))
        except Unsupported:
            pass  # a protocol without queue.declare: the round trip below still proves an answer
        session.sync()
        return None
    except (ConformanceError, OSError) as exc:
        return str(exc) or type(exc).__name__
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


@dataclass(frozen=True)
class Judgement:
    """What the plugin does with a scenario's exception: a verdict to record (None keeps the
    plugin's own error record) and, when the target stopped answering, the cause for the run."""

    verdict: Verdict | None
    dead_cause: str | None


def timed_out(exc: BaseException) -> bool:
    """Exceptions after which the target may have stopped answering (worth a health probe). The case
    deadline itself is not one: operations time out (NoReply) well before it, and after it the
    case must end at once."""
    return isinstance(exc, (ConnectionLost, OperationTimeout, DeliveriesMissing))


def after_scenario_exception(exc: BaseException, *, adapter: Adapter, url: str, case_id: str,
                             requirement_text: str, probe_timeout: float = PROBE_TIMEOUT_S) -> Judgement:
    """Decide what a scenario that raised ``exc`` means. Probes the target only after a timeout-like
    failure; a broker refusal (ChannelClosed) or a suite bug is not a liveness question."""
    if not timed_out(exc):
        return Judgement(None, None)
    silent = health_probe(adapter, url, probe_timeout)
    if silent is not None:
        cause = f"target stopped answering {operation_of(exc)} since {case_id} (health probe: {silent})"
        return Judgement(Verdict(Outcome.ERROR, requirement_text, f"{exc}; {cause}", reason="target stopped answering"), cause)
    if isinstance(exc, DeliveriesMissing):
        return Judgement(missing_verdict(missing_obs(exc)), None)
    return Judgement(None, None)
