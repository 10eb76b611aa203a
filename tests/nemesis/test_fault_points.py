"""Fault points (conformance/nemesis/points.py): every protocol maps every point to one of its own
frames, or says why it cannot; a case's point becomes that frame's fault, or cannot-express."""

from __future__ import annotations

import pytest

from conformance.errors import Unsupported
from conformance.nemesis.faults import Action, Moment, Sender
from conformance.nemesis.points import fault_at, meanings, points
from conformance.nemesis.wire import frame_names


@pytest.mark.parametrize("protocol", ["amqp-0-9-1", "amqp-1.0"])
def test_every_point_is_a_frame_of_the_protocol_or_says_why_not(protocol: str) -> None:
    mapped = points(protocol)
    assert set(mapped) == set(meanings())
    names = frame_names(protocol)
    for p in mapped.values():
        assert (p.frame in names) if p.cannot is None else (p.frame is None and len(p.cannot) > 30), p


def test_one_moment_two_protocols_and_a_moment_one_cannot_express() -> None:
    f091 = fault_at("amqp-0-9-1", "commit-answer", moment=Moment.AFTER, connection=2)
    f10 = fault_at("amqp-1.0", "commit-answer", moment=Moment.AFTER, connection=2)
    assert (f091.frame, f10.frame) == ("tx.commit-ok", "discharge-accepted")
    assert f091.sender is f10.sender is Sender.SERVER and f10.moment is Moment.AFTER and f10.connection == 2
    assert fault_at("amqp-1.0", "commit", action=Action.FIN, nth=2).describe() == "fin on 2nd discharge from the client, before forwarding"
    with pytest.raises(Unsupported, match="amqp-1.0 cannot express: AMQP 1.0 sends a message's header") as exc:
        fault_at("amqp-1.0", "delivery-header")
    assert exc.value.kind == "cannot-express"
    with pytest.raises(Unsupported, match="maps no frame"):
        fault_at(None, "commit")
