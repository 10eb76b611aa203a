"""Fault kinds (conformance.nemesis.kinds): each names what a target must offer for it, and a case
whose target cannot take its fault is unsupported (no-fault) before it runs, by the same rule that
makes a case its protocol cannot express unsupported (cannot-express). Pure logic on stand-in
targets; the whole catalogue on a real node shows the same verdicts (tests/runner/test_shared_fault.py,
tests/e2e/test_e2e_rabbitmq.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from adapters.amqp091.pika_adapter import PikaAdapter
from conformance.cases import all_cases
from conformance.catalogue.capabilities import ABILITY_PREFIX, check_names, vocabulary
from conformance.catalogue.profiles import bundled_profiles
from conformance.catalogue.requirements import requirement
from conformance.errors import TargetCannot, UsageError
from conformance.kit.history import History
from conformance.nemesis import kinds
from conformance.nemesis.cluster import cluster_ops
from conformance.nemesis.faults import Action
from conformance.runner.case_runner import _not_applicable
from conformance.unsupported import NO_FAULT

NOT_A_CLUSTER = "is not a cluster of 3 or more nodes the suite launched; failover cases need one (e.g. --target rabbitmq-cluster)"
NOT_LAUNCHED = "cannot be restarted or killed by the suite; broker faults need a launched target"


class Node:
    """A launched single node: it restarts, kills and starts, and says so."""

    def __init__(self, name: str = "node-1") -> None:
        self.name, self.did = name, []

    @property
    def can_restart(self) -> bool:
        return True

    def restart(self) -> None:
        self.did.append("restart")

    def kill(self) -> None:
        self.did.append("kill")

    def start(self) -> None:
        self.did.append("start")


class Cluster(Node):
    """A launched cluster of ``size`` nodes, offering the node operations (kinds.ClusterOps)."""

    def __init__(self, size: int = 3) -> None:
        super().__init__("cluster")
        self.size = size

    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.size + 1)]

    def node_urls(self) -> dict[str, str]:
        return {}

    def kill_node(self, name: str) -> None:
        self.did.append(f"kill {name}")

    def start_node(self, name: str) -> None:
        self.did.append(f"start {name}")

    stop_node = restart_node = node_running = queue_replicas = set_policy = clear_policy = lambda self, *a, **k: None  # type: ignore[assignment]


def test_every_ability_is_in_the_one_vocabulary_and_every_target_ability_belongs_to_a_kind() -> None:
    abilities = {k.ability for k in kinds.KINDS.values() if k.ability}
    assert abilities <= vocabulary().keys()
    assert {n for n in vocabulary() if n.startswith(ABILITY_PREFIX)} == abilities
    assert all(k.cannot for k in kinds.KINDS.values() if k.ability), "a kind that needs an ability says why a target lacks it"
    # an ability is one fact about a target: every kind that needs it asks the target the same way
    for ability in abilities:
        assert len({k.offered_by for k in kinds.KINDS.values() if k.ability == ability}) == 1, ability


def test_a_target_ability_is_refused_where_a_protocol_capability_belongs() -> None:
    """A case needs a target's ability by naming its fault kind: never in a requirement's needs,
    an adapter's capabilities or a profile's lacks (one place says it)."""
    with pytest.raises(UsageError, match="'fault.restart' is a target's ability"):
        check_names(["ack.individual", "fault.restart"], "requirement X needs")


def test_every_proxy_action_is_a_connection_kind_any_target_takes() -> None:
    assert set(kinds.CONNECTION_KINDS) == {a.value for a in Action}
    for k in kinds.CONNECTION_KINDS.values():
        assert k.scope == kinds.CONNECTION and k.ability is None
        assert kinds.fault_applicability([k], None) is None


@pytest.mark.parametrize("target, restart, node_kill", [
    (None, f"this target {NOT_LAUNCHED}", f"this target {NOT_A_CLUSTER}"),
    (Node("rabbitmq-local"), None, f"rabbitmq-local {NOT_A_CLUSTER}"),
    (Cluster(2), None, f"cluster {NOT_A_CLUSTER}"),
    (Cluster(3), None, None),
])
def test_which_targets_take_which_kinds_in_the_kinds_own_words(target: Any, restart: str | None, node_kill: str | None) -> None:
    assert kinds.fault_applicability([kinds.RESTART], target) == restart
    assert kinds.fault_applicability([kinds.KILL], target) == restart
    assert kinds.fault_applicability([kinds.NODE_KILL], target) == node_kill
    assert kinds.fault_applicability([], target) is None


def test_a_scenario_that_faults_without_naming_its_kind_gets_the_same_words() -> None:
    with pytest.raises(TargetCannot) as exc:
        cluster_ops(Node("rabbitmq-local"))
    assert str(exc.value) == f"rabbitmq-local {NOT_A_CLUSTER}" and exc.value.kind == NO_FAULT


def test_every_case_names_the_kinds_it_inflicts_and_disrupts_the_broker_exactly_then() -> None:
    named = 0
    for cls in all_cases():
        for variant in cls.variants or (None,):
            faults = cls().fault_kinds(variant)
            disrupts = any(k.scope in (kinds.BROKER, kinds.NODE) for k in faults)
            assert disrupts == cls.disrupts_broker, (cls.__name__, variant, faults)
            named += bool(faults)
    assert named >= 14  # 9 failover, 4 persist, 1 tx on today's catalogue


def test_kinds_by_name_and_only_broker_kinds_are_shared_by_phased_cases() -> None:
    assert kinds.kind("kill") is kinds.KILL and kinds.kind(kinds.RESTART) is kinds.RESTART
    with pytest.raises(ValueError, match="unknown fault kind 'reboot'"):
        kinds.kind("reboot")
    with pytest.raises(ValueError, match="'node-kill' is not a broker fault"):
        kinds.broker_kind(kinds.NODE_KILL)


@pytest.mark.parametrize("kind, shared, did, events", [
    (kinds.KILL, "", ["kill", "start"], [("kill -9", "n"), ("start", "n accepting connections after 0.0s")]),
    (kinds.RESTART, "", ["restart"], [("restart", "n accepting connections after 0.0s")]),
    (kinds.KILL, "(one kill shared by 2 cases)", ["kill", "start"],
     [("kill -9", "n (one kill shared by 2 cases)"), ("start", "n accepting connections after 0.0s (one kill shared by 2 cases)")]),
])
def test_a_broker_kind_is_fired_then_healed_and_the_history_says_so(kind: kinds.FaultKind, shared: str, did: list[str],
                                                                     events: list[tuple[str, str]]) -> None:
    node, said = Node("n"), []
    kinds.strike(kind, node, lambda op, detail: said.append((op, detail)), shared)
    assert node.did == did and said == events


def test_a_node_kind_is_fired_and_healed_through_the_cluster_operations() -> None:
    from conformance.nemesis.cluster import Nodes

    cluster = Cluster(3)
    nodes = Nodes(SimpleNamespace(target=cluster, history=History(), node_urls=None))
    nodes.kill("n2")
    nodes.heal()
    assert cluster.did == ["kill n2", "start n2"]
    assert [(e.op, e.detail.split(" accepting")[0]) for e in nodes.ctx.history.events if e.actor == "nemesis"] == [("kill -9", "n2"), ("start", "n2")]


@pytest.mark.parametrize("target, url, label", [(Node("rabbitmq-local"), "", "rabbitmq-local"),
                                                (None, "amqp://u:secret@h:5672/", "amqp://u:***@h:5672/")])
def test_the_runner_makes_a_failover_case_on_one_node_unsupported_before_it_runs(target: Any, url: str, label: str) -> None:
    """The record the scenario's TargetCannot used to write: same kind, same reason, no scenario run."""
    profile = next(p for p in bundled_profiles() if p.id == "rabbitmq-3.10")
    state = SimpleNamespace(adapter=PikaAdapter(), profile=profile, target=target, url=url, target_label=label, capabilities=None)
    req = requirement("FAILOVER-QQ-CONFIRMED-SURVIVES")
    cls = next(c for c in all_cases() if c.requirement == req.id)
    v = _not_applicable(req, state, "quorum", cls().fault_kinds("leader"))  # type: ignore[arg-type]
    assert v is not None and v.unsupported_kind == NO_FAULT and v.observed == "not run"
    assert v.reason == f"target {label}: {label if target else 'this target'} {NOT_A_CLUSTER}"
    restart = next(c for c in all_cases() if c.requirement == "PERSIST-TRANSIENT-FATE")
    v = _not_applicable(requirement(restart.requirement), state, "classic", restart().fault_kinds(None))  # type: ignore[arg-type]
    assert (v is None) == (target is not None)
