"""qpidd's queue admin over QMF (adapters/amqp10/qmf.py): the request messages as qpid-cpp's own
AMQP 1.0 client builds them, answers recorded from qpidd 1.39.0, the argument mapping (nothing
reaches qpidd that is not mapped, nothing mapped is dropped), the capabilities a run gets from its
admin backend, and one test against the real qpidd (skipped where ../shared/brokers is absent)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from proton import Message

from adapters.amqp10 import qmf
from adapters.amqp10.admin import Amqp091Admin, ProtocolCounter, admin_for, backend_capabilities
from adapters.amqp10.proton_adapter import ProtonAdapter
from conformance.api import AckMode, QueueSpec, ServerInfo
from conformance.catalogue.capabilities import applicability, server_capabilities
from conformance.catalogue.configurations import configurations as load_configurations
from conformance.catalogue.requirements import catalogue
from conformance.errors import ChannelClosed, TargetCannot
from conformance.unsupported import CANNOT_EXPRESS

# -- messages ---------------------------------------------------------------------------------


def test_a_method_request_is_what_qpid_cpps_own_amqp_1_0_client_sends() -> None:
    msg = qmf.method_request("create", {"type": "queue", "name": "q", "properties": {}, "strict": True}, reply_to="r1", correlation_id="c1")
    # management/python/lib/qmf/client.py BrokerAgent._request / _method
    assert msg.address == "qmf.default.direct" and msg.subject == "broker" and (msg.reply_to, msg.correlation_id) == ("r1", "c1")
    assert msg.properties == {"method": "request", "qmf.opcode": "_method_request", "x-amqp-0-10.app-id": "qmf2"}
    assert msg.body == {"_object_id": {"_object_name": "org.apache.qpid.broker:broker:amqp-broker"}, "_method_name": "create",
                        "_arguments": {"type": "queue", "name": "q", "properties": {}, "strict": True}}
    query = qmf.query_request("org.apache.qpid.broker:queue:q", reply_to="r1", correlation_id="c2")
    assert query.properties["qmf.opcode"] == "_query_request"
    assert query.body == {"_what": "OBJECT", "_object_id": {"_object_name": "org.apache.qpid.broker:queue:q"}}


def recorded(opcode: str, body: Any, **extra: Any) -> Message:
    """An answer as qpidd 1.39.0 sent it: its strings are AMQP 1.0 binary (0-10 str16)."""
    return Message(body=body, properties={"method": "response", "qmf.agent": "broker", "qmf.opcode": opcode, **extra})


def test_answers_parse_with_their_strings_as_text() -> None:
    assert qmf.parse_answer(recorded("_method_response", {"_arguments": {}})) == qmf.Answer("_method_response", {"_arguments": {}}, False)
    answer = qmf.parse_answer(recorded("_query_response", [{"_values": {"name": b"q1", "msgDepth": 5}}], **{"qmf.content": "_data", "partial": None}))
    assert answer.body == [{"_values": {"name": "q1", "msgDepth": 5}}] and answer.partial
    with pytest.raises(qmf.QmfError) as err:
        qmf.parse_answer(recorded("_exception", {"_values": {"error_code": 7, "error_text": b"not-found: Delete failed. No such queue: nosuch"}}))
    assert err.value.reply_code == 404 and "No such queue" in err.value.text
    assert qmf.QmfError(7, "object already exists: ex1").reply_code == 405
    assert qmf.QmfError(7, "something new: x").reply_code == 541


#: A queue's statistics as qpidd 1.39.0 reported them: five messages enqueued, two of them acquired
#: by a receiving link and not yet settled.
HELD_TWO = {"msgDepth": 5, "msgTotalEnqueues": 5, "acquires": 2, "releases": 0, "discardsTtl": 0, "discardsRing": 0, "consumerCount": 1}
#: ... and after that link's connection closed with one of them accepted: released 2, acquired again 1, dequeued 1
AFTER_CLOSE = {"msgDepth": 4, "msgTotalEnqueues": 5, "acquires": 3, "releases": 2, "discardsTtl": 0, "discardsRing": 0, "consumerCount": 0}


def test_ready_is_what_was_made_available_and_not_taken_since() -> None:
    held = qmf.queue_counts("q", HELD_TWO)
    assert (held.ready, held.consumers) == (3, 1) and "msgDepth 5 (2 acquired)" in held.method
    after = qmf.queue_counts("q", AFTER_CLOSE)
    assert (after.ready, after.consumers) == (4, 0)
    expired = qmf.queue_counts("q", {**AFTER_CLOSE, "msgDepth": 3, "discardsTtl": 1})
    assert expired.ready == 3


def test_statistics_that_do_not_add_up_give_no_count() -> None:
    with pytest.raises(TargetCannot, match="do not add up") as err:
        qmf.queue_counts("q", {**HELD_TWO, "releases": 9})
    assert err.value.kind == CANNOT_EXPRESS
    with pytest.raises(TargetCannot, match="no discardsRing"):
        qmf.queue_counts("q", {k: v for k, v in HELD_TWO.items() if k != "discardsRing"})


# -- the argument mapping --------------------------------------------------------------------------


def props(**arguments: Any) -> dict[str, Any]:
    return qmf.queue_properties(QueueSpec("q", arguments=arguments))


def test_mapped_arguments_become_qpidds_own_options() -> None:
    assert props() == {"durable": True}
    assert props(**{"x-max-priority": 10}) == {"durable": True, "qpid.priorities": 10}
    assert props(**{"x-max-length": 10000, "x-overflow": "reject-publish"}) == {"durable": True, "qpid.max_count": 10000, "qpid.policy_type": "reject"}
    assert props(**{"x-max-length": 1}) == {"durable": True, "qpid.max_count": 1, "qpid.policy_type": "ring"}  # RabbitMQ's default overflow
    assert qmf.queue_properties(QueueSpec("q", durable=False)) == {"durable": False}


@pytest.mark.parametrize("arguments, words", [
    ({"x-max-priority": 5}, "holds from 9"),                      # qpidd bands fewer levels differently
    ({"x-overflow": "reject-publish-dlx"}, "maps only"),
    ({"x-message-ttl": 1000}, "has no such feature"),
    ({"x-delivery-limit": 3}, "has no such feature"),
    ({"x-single-active-consumer": True}, "has no such feature"),
    ({"x-expires": 600}, "has only a different one"),
    ({"x-dead-letter-exchange": ""}, "has only a different one"),
    ({"x-queue-mode": "lazy"}, "no mapping"),                       # unknown: qpidd would take it and ignore it
])
def test_an_argument_without_a_mapping_of_the_same_meaning_is_refused_before_anything_is_sent(arguments: dict[str, Any], words: str) -> None:
    with pytest.raises(TargetCannot, match=words) as err:
        qmf.queue_properties(QueueSpec("q", arguments=arguments))
    assert err.value.kind == CANNOT_EXPRESS


def test_flags_without_the_same_meaning_are_refused() -> None:
    with pytest.raises(TargetCannot, match="has no such feature for a queue declared exclusive"):
        qmf.queue_properties(QueueSpec("q", exclusive=True))
    with pytest.raises(TargetCannot, match="has only a different one for a queue declared auto-delete"):
        qmf.queue_properties(QueueSpec("q", auto_delete=True))


def test_every_configuration_is_either_mapped_whole_or_refused() -> None:
    """No argument of the catalogue's configurations is silently dropped: each one either reaches
    qpidd as an option, or the whole declaration is refused."""
    data = qmf.mapping()["arguments"]
    for name, config in load_configurations().items():
        spec = QueueSpec("q", arguments=dict(config.arguments), **config.declare)
        try:
            out = qmf.queue_properties(spec)
        except TargetCannot:
            continue
        for key in config.arguments:
            assert data[key]["property"] in out, f"{name}: {key} dropped"


def test_every_mapping_cites_its_source() -> None:
    data = qmf.mapping()
    for section in ("flags", "arguments"):
        for key, entry in data[section].items():
            assert entry["source"].strip(), f"{section}.{key}"
            assert sum(k in entry for k in ("property", "absent", "differs")) == 1, f"{section}.{key}"


# -- capabilities per backend -------------------------------------------------------------------


def test_the_admin_backend_adds_its_capabilities_to_the_adapters() -> None:
    adapter = ProtonAdapter()
    admin_caps = {"queue.arguments", "exchanges", "queue.durability", "queue.purge", "consume.many-per-session"}  # both count consumers
    for product in ("qpid-cpp", "RabbitMQ"):
        assert server_capabilities(adapter, ServerInfo(product, "1", "amqp-1.0")) == adapter.capabilities | admin_caps
    assert server_capabilities(adapter, ServerInfo("qpid-proton-example", "0", "amqp-1.0")) == adapter.capabilities
    assert backend_capabilities("anything else") == frozenset()
    assert isinstance(admin_for("qpid-cpp", "amqp://h:1", op_timeout=1, adapter=ProtonAdapter), qmf.QmfAdmin)
    assert isinstance(admin_for("RabbitMQ", "amqp://h:1", op_timeout=1, adapter=ProtonAdapter), Amqp091Admin)
    assert isinstance(admin_for("other", "amqp://h:1", op_timeout=1, adapter=ProtonAdapter), ProtocolCounter)


def test_a_configured_queue_requirement_applies_where_the_backend_can_declare_it() -> None:
    req = catalogue()["LIMIT-MAX-DELIVERIES"]
    adapter, profile = ProtonAdapter(), SimpleNamespace(id="p", lacks={})
    assert "needs queue.arguments" in (applicability(req, adapter, profile) or "")
    assert applicability(req, adapter, profile, server_capabilities(adapter, ServerInfo("qpid-cpp", "1.39.0", "amqp-1.0"))) is None


def test_the_side_session_admin_refuses_an_exclusive_queue_it_would_own() -> None:
    with pytest.raises(TargetCannot, match="side connection") as err:
        Amqp091Admin("amqp://h:1", op_timeout=1).declare_queue(QueueSpec("q", exclusive=True))
    assert err.value.kind == CANNOT_EXPRESS


# -- against the real qpidd ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def qpidd() -> Iterator[str]:
    from tests.adapters.test_seed_targets import seed

    target = seed("qpidd")  # skips in one line where ../shared/brokers is absent
    target.start()
    try:
        yield target.url
    finally:
        target.stop()


def test_qpidd_queues_counts_and_departures_through_qmf(qpidd: str) -> None:
    admin = qmf.QmfAdmin(qpidd, op_timeout=5)
    conn = ProtonAdapter().connect(qpidd, op_timeout=5)
    try:
        q = admin.declare_queue(QueueSpec("conformance.qmf.q", durable=False, arguments={"x-max-priority": 10}))
        assert admin.declare_queue(QueueSpec(q, durable=False, arguments={"x-max-priority": 10})) == q  # the same again: idempotent
        with pytest.raises(ChannelClosed, match="object already exists"):
            admin.declare_queue(QueueSpec(q, durable=False))
        session = conn.session()
        session.enable_confirms()
        for mid in ("m1", "m2", "m3"):
            session.publish(q, mid.encode(), message_id=mid)
        consumer_conn = ProtonAdapter().connect(qpidd, op_timeout=5)
        held = consumer_conn.session().consume(q, ack_mode=AckMode.MANUAL, prefetch=2).take(2, 5)
        assert [d.message_id for d in held] == ["m1", "m2"]
        stats = admin.queue_stats(q)
        assert (stats.ready, stats.consumers) == (1, 1), stats
        consumer_conn.cut()
        how = admin.departure_barrier(q)
        assert how is not None and "no consumer and nothing acquired" in how
        assert (admin.queue_stats(q).ready, admin.queue_stats(q).consumers) == (3, 0)
        admin.declare_exchange("conformance.qmf.x", "direct")
        admin.declare_exchange("conformance.qmf.x", "direct")
        admin.bind_queue(q, "conformance.qmf.x", "k")
        admin.delete_exchange("conformance.qmf.x")
        admin.delete_queue(q)
        admin.delete_queue(q)  # gone already: done
        with pytest.raises(ChannelClosed, match="NOT_FOUND") as err:
            admin.queue_stats(q)
        assert err.value.code == 404
    finally:
        conn.close()
        admin.close()
