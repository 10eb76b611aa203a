"""Which cells a run poses (conformance.runner.posed): pure logic over the bundled profiles and the
QMF argument mapping, no broker."""

from __future__ import annotations

from types import SimpleNamespace

from adapters.amqp10.admin import declarable
from conformance.api import QueueSpec, ServerInfo
from conformance.catalogue.profiles import select_profile
from conformance.runner import posed


class _Qpidd:
    """An adapter whose admin backend is qpidd's (the proton adapter's declarable, by product)."""

    def declarable(self, server: ServerInfo, spec: QueueSpec) -> str | None:
        return declarable(server.product, spec)


SERVER = ServerInfo(product="qpid-cpp", version="1.39.0", protocol="amqp-1.0", properties={})


def test_qpidd_poses_the_configurations_qmf_maps_and_says_why_not_the_others() -> None:
    profile = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
    not_posed = posed.undeclarable(_Qpidd(), SERVER, profile)
    # mapped to qpidd options of the same meaning: posed
    for cell in ("classic+priority", "classic+length-limit-reject", "classic+length-limit-drop-head"):
        assert cell not in not_posed
    # absent or different in qpidd: not posed, each with the mapping's words
    assert "has no delivery limit" in not_posed["classic+delivery-limit"]
    assert "no per-queue message TTL" in not_posed["classic+message-ttl"]
    assert "alternate-exchange" in not_posed["classic+dead-letter"]
    assert {"classic+exclusive", "classic+auto-delete", "classic+single-active-consumer", "classic+queue-ttl"} <= set(not_posed)


def test_an_admin_that_learns_refusals_on_the_wire_poses_every_configuration() -> None:
    profile = select_profile("rabbitmq", "3.10.8", "amqp-1.0")
    server = ServerInfo(product="RabbitMQ", version="3.10.8", protocol="amqp-1.0", properties={})
    assert posed.undeclarable(_Qpidd(), server, profile) == {}
    assert posed.undeclarable(object(), server, profile) == {}  # an adapter that cannot tell


def test_a_queue_type_the_profile_lacks_is_not_posed() -> None:
    profile = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
    state = SimpleNamespace(profile=profile, not_posed={"classic+delivery-limit": "no delivery limit"})
    assert posed.why_not_posed(state, "quorum") == "profile qpid-cpp has no queue type 'quorum'"
    assert posed.why_not_posed(state, "classic+delivery-limit") == "no delivery limit"
    assert posed.why_not_posed(state, "classic") is None
    assert posed.why_not_posed(state, "classic+priority") is None
    assert posed.why_not_posed(state, None) is None


def test_the_summary_line_names_every_configuration_not_posed() -> None:
    assert posed.summary({}) == ""
    line = posed.summary({"classic+message-ttl": "x", "classic+delivery-limit": "y"})
    assert "classic+delivery-limit, classic+message-ttl" in line and "run.json not_posed" in line
