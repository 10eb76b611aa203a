"""Soak mutations: the broker's behaviour made wrong on the wire, so a real soak must see it.

A self-test aid, like ``conformance selftest``'s mutations: ``conformance soak --mutation NAME``
puts the clients behind the fault proxy with one operator of the protocol rewriting frames
(conformance.nemesis.mutations; the AMQP 0-9-1 ones in adapters/amqp091/mutators/soak.py and
mutations.py). The soak then judges a broker known to be wrong, and the checker named here must
fail: a soak that passes under its mutation cannot find that fault. soak.json records the
mutation, and its verdicts are about the mutation, never about the broker.

(conformance.soak.mutations edits recorded histories instead: the checkers' unit tests.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.errors import UsageError


@dataclass(frozen=True)
class SoakMutation:
    name: str
    #: protocol -> the proxy's operator, ``name`` or ``name:param`` ({rate} and {seed} filled in)
    operators: dict[str, str]
    #: The checker that must fail, and the anomaly it names.
    checker: str
    anomaly: str
    does: str
    #: The default of the mutation's parameter (``--mutation NAME:PARAM`` overrides it), or None.
    default_param: str | None = None
    #: A fault kind the schedule must hold for the mutation to act (a failover needs one).
    needs_kind: str | None = None
    #: A producer mode the workload must run.
    needs_mode: str | None = None


MUTATIONS: dict[str, SoakMutation] = {m.name: m for m in (
    SoakMutation(
        "confirmed-lost", {"amqp-0-9-1": "confirmed-publish-lost-1-in:{param}/{seed}"}, "queue", "lost",
        "one in N (default 1,000) confirm-mode publishes, counted over every connection at seeded positions, is discarded "
        "by the proxy and confirmed to the client: the broker confirmed a message it never enqueued",
        default_param="1000", needs_mode="confirm"),
    SoakMutation(
        "duplicate-after-failover", {"amqp-0-9-1": "acked-redelivered-after-failover"}, "queue", "duplicate-after-ack",
        "after a connection is lost (a cut, a broker restart), one message its consumer had acked (and seen the broker answer "
        "after) is delivered again to the next consumer served: the broker forgot acks across the failover",
        needs_kind="any"),
    SoakMutation(
        "tx-publish-dropped", {"amqp-0-9-1": "tx-publish-dropped:{param}"}, "tx", "partial-commit",
        "the Nth publish (default 2nd) of every transaction never reaches the queue; tx.commit commits the rest "
        "(the self-test's tx-publish-dropped operator): a commit that is not atomic",
        default_param="2", needs_mode="tx"),
)}


@dataclass(frozen=True)
class Chosen:
    """A soak mutation as one run applies it."""

    mutation: SoakMutation
    param: str | None
    #: The proxy operator's spec (conformance.nemesis.mutations.make).
    spec: str

    def record(self, rewritten: int | None = None) -> dict[str, Any]:
        m = self.mutation
        return {"name": m.name, **({"param": self.param} if self.param is not None else {}), "operator": self.spec,
                "does": m.does, "expected_checker": m.checker, "expected_anomaly": m.anomaly,
                **({"rewritten": rewritten} if rewritten is not None else {}),
                "about": "a self-test of the soak: the verdicts judge a broker the proxy made wrong on purpose, not the broker"}


def parse(value: str) -> tuple[SoakMutation, str | None]:
    """``NAME`` or ``NAME:PARAM`` of :data:`MUTATIONS`; UsageError names the known ones."""
    name, _, param = value.partition(":")
    m = MUTATIONS.get(name)
    if m is None:
        raise UsageError(f"--mutation {value}: unknown soak mutation; known: {', '.join(sorted(MUTATIONS))}")
    if param and m.default_param is None:
        raise UsageError(f"--mutation {value}: {name} takes no parameter")
    if param:
        try:
            if int(param) < 1:
                raise ValueError
        except ValueError:
            raise UsageError(f"--mutation {value}: the parameter is a positive whole number") from None
    return m, param or None


def check_options(value: str, modes: tuple[str, ...], kinds: set[str]) -> None:
    """The workload and schedule let the mutation act; UsageError says what is missing."""
    m, _ = parse(value)
    if m.needs_mode and m.needs_mode not in modes:
        raise UsageError(f"--mutation {m.name} acts on {m.needs_mode}-mode publishes: --modes must include {m.needs_mode}")
    if m.needs_kind and not kinds:
        raise UsageError(f"--mutation {m.name} acts after a failover: give a fault (--nemesis cut, or a --schedule)")


def choose(value: str, seed: int, protocol: str) -> Chosen:
    """The operator the fault proxy runs for ``value`` on ``protocol``, its positions seeded by ``seed``."""
    m, param = parse(value)
    template = m.operators.get(protocol)
    if template is None:
        raise UsageError(f"--mutation {m.name}: no wire operator for {protocol} (it has one for {', '.join(sorted(m.operators))})")
    return Chosen(m, param, template.format(param=param or m.default_param, seed=seed))
