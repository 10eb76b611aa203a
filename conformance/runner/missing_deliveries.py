"""Missing deliveries: a delivery the scenario was owed that did not come while the broker still
answered is the broker's failure, judged as a verdict, never the suite's error.

Scenarios wait ``conformance.kit.context.state.DELIVERY_WINDOW_S`` for deliveries they expect and raise
:class:`conformance.errors.DeliveriesMissing`; once the health probe (conformance.runner.liveness)
showed the broker still answers, :func:`missing_verdict` judges what arrived.
"""

from __future__ import annotations

from typing import Any

from conformance.errors import DeliveriesMissing
from conformance.kit.verdicts import Outcome, Verdict


def missing_obs(exc: DeliveriesMissing) -> dict[str, Any]:
    """The observation a missing delivery makes, as plain data (what a verdict judges)."""
    missing = [m for m in exc.expected_ids or [] if m not in exc.arrived]
    return {"queue": exc.queue, "wanted": exc.wanted, "arrived": exc.arrived, "missing": missing, "window_s": exc.window_s}


def missing_verdict(obs: dict[str, Any]) -> Verdict:
    """A delivery the scenario was owed (messages confirmed into the queue, a consumer with credit)
    did not come within the window while the broker still answered: the message was lost or
    withheld. That is the broker's failure, never the suite's error. The key lets a profile
    document it as a deviation (e.g. a delivery limit enforced lazily)."""
    arrived, missing = obs["arrived"], obs.get("missing") or []
    what = f" (missing {', '.join(missing)})" if missing else ""
    return Verdict(
        Outcome.FAIL,
        expected=f"{obs['wanted']} deliveries from the queue within {obs['window_s']:g}s (the messages were in the queue, the consumer had credit)",
        observed=f"{len(arrived)} arrived within {obs['window_s']:g}s{what}: [{', '.join(arrived)}]; the broker still answered a health probe",
        key="deliveries-missing",
        spec="fail",
    )
