"""What every checker shares: its options, its result, an anomaly, and the cap on listed anomalies."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("pass", "fail", "unknown")


@dataclass(frozen=True)
class CheckOptions:
    #: The broker promises per-producer order on this workload (one queue): the order checker then
    #: judges first deliveries' order per producer and consumer; off, it does not judge.
    ordered: bool = False
    #: Delivery counts must grow on every redelivery (a broker that counts them, e.g. a quorum
    #: queue's x-delivery-count): an equal count on a later delivery of the same id is an anomaly.
    requeue_counts: bool = False
    #: The profile's redelivery.signal (conformance/kit/redelivery.py): which mark the broker documents
    #: on a redelivery beyond the spec's; "delivery-count" makes the redelivery checker require an AMQP
    #: 1.0 delivery-count grown on a return the broker got no outcome for.
    redelivery_signal: str = "redelivered"
    #: Anomalies listed per checker (each kind is counted in full in ``counts`` whatever the cap).
    max_anomalies: int = 1000
    #: On a cluster: seconds before a node fault began within which an ack, like one sent while the
    #: fault was in progress, is not proven by a round trip on its channel (the consumer's node had
    #: it, the queue's leader on another node maybe not: the link between them was cut or the leader
    #: died with the ack in flight). 0 (off): a round trip on the channel proves it (one node).
    ack_in_flight_s: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> CheckOptions:
        d = d or {}
        return cls(**{k: d[k] for k in ("ordered", "requeue_counts", "redelivery_signal", "max_anomalies", "ack_in_flight_s") if k in d})


DEFAULT = CheckOptions()


@dataclass
class Anomaly:
    kind: str
    #: "Expected: ...; Actual: ..." in words.
    text: str
    #: The indexes of the operations that show it.
    ops: list[int]
    #: The profile entry that documents it, when one does (conformance.soak.documented): set after the
    #: checkers ran, from the target's profile; None when undocumented.
    documented: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckResult:
    name: str
    verdict: str
    counts: dict[str, int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)
    #: Why the verdict is unknown, or what was not judged; empty when there is nothing to say.
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, "counts": dict(self.counts),
                "anomalies": [a.to_dict() for a in self.anomalies], "note": self.note}


class Findings:
    """Collects a checker's anomalies: each kind counted, the first ``limit`` kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.listed: list[Anomaly] = []
        self.by_kind: dict[str, int] = {}

    def add(self, kind: str, text: str, ops: list[int]) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if len(self.listed) < self.limit:
            self.listed.append(Anomaly(kind, text, sorted(ops)))

    def total(self) -> int:
        return sum(self.by_kind.values())

    def result(self, name: str, counts: dict[str, int], *, undecided: str = "", note: str = "") -> CheckResult:
        """fail on any anomaly; else unknown when ``undecided`` says what the history cannot decide;
        else pass. Every anomaly kind appears in the counts (0 when none)."""
        counts = {**counts, **self.by_kind}
        counts["anomalies"] = self.total()
        if self.total():
            verdict = "fail"
        elif undecided:
            verdict = "unknown"
        else:
            verdict = "pass"
        text = "; ".join(t for t in (undecided, note) if t)
        return CheckResult(name, verdict, counts, self.listed, text)


def drain_completed(ops: list[dict[str, Any]]) -> int | None:
    """The index of the last drain ok, or None: the drain is what makes loss decidable."""
    for op in reversed(ops):
        if op["f"] == "drain" and op["type"] == "ok":
            return op["index"]
    return None


def consumer_of(op: dict[str, Any]) -> str:
    return op["value"].get("consumer") or op["process"]


NO_DRAIN = "no drain op completed: whether a message was never delivered cannot be decided"
