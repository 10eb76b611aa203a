"""STOMP 1.2 frames (requirement pack ``stomp``): what the specification requires of a server,
observed on the pack's own STOMP connections (raw.py); queues, barriers and the final drain go
through the run's adapter like every other case's."""

from __future__ import annotations

import uuid

from conformance.catalogue.profiles import Profile
from conformance.errors import ConnectionLost, NoReply
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, holds
from conformance_stomp.pack.cases.raw import RawStomp


def raw(ctx: CaseContext, actor: str) -> RawStomp:
    """A raw STOMP connection of the case, named as the adapter names its own (the self-test's probe)."""
    conn = RawStomp(ctx.url, f"conformance {ctx.requirement.id} {actor}")
    ctx.history.add(actor, "connect", "raw STOMP 1.2 connection")
    return conn


class TestReceiptCarriesReceiptId(Case):
    """Four client frames of different commands ask for a receipt (SUBSCRIBE, SEND, the ACK of the
    message sent, UNSUBSCRIBE); every RECEIPT must carry one of the values asked for, and every value
    asked for must come back."""

    requirement = "STOMP-RECEIPT-ID"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        c = raw(ctx, "client")
        try:
            dest = c.dialect.destination(q)
            tag = uuid.uuid4().hex[:8]
            asked = [f"subscribe-{tag}", f"send-{tag}", f"ack-{tag}", f"unsubscribe-{tag}"]
            c.send("SUBSCRIBE", {"id": "s1", "destination": dest, "ack": "client-individual", "receipt": asked[0]})
            c.send("SEND", {"destination": dest, "receipt": asked[1]}, b"m1")
            receipts: list[dict[str, str]] = []
            missing = ""
            try:
                while True:
                    f = c.next("MESSAGE and RECEIPTs")
                    if f.command == "RECEIPT":
                        receipts.append(f.headers)
                    elif f.command == "MESSAGE":
                        c.send("ACK", {"id": f.headers.get("ack", ""), "receipt": asked[2]})
                        c.send("UNSUBSCRIBE", {"id": "s1", "receipt": asked[3]})
                    if len(receipts) == len(asked):
                        break
            except (NoReply, ConnectionLost) as exc:
                missing = str(exc)
            ctx.history.add("client", "RECEIPT", f"receipt-ids {[h.get('receipt-id') for h in receipts]}")
            return {"asked": asked, "receipt_ids": [h.get("receipt-id") for h in receipts], "short": missing}
        finally:
            c.close()

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        got = obs["receipt_ids"]
        return holds(sorted(got) == sorted(obs["asked"]),
                     expected=f"one RECEIPT per frame, receipt-id in {obs['asked']}",
                     observed=f"RECEIPT receipt-ids {got}" + (f" ({obs['short']})" if obs["short"] else ""))


class TestIndividualAckNotCumulative(Case):
    """Two deliveries to an ack:client-individual subscription; ACK the second (its id the MESSAGE's
    ack header); lose the connection. The first must come back, the second must not."""

    requirement = "STOMP-INDIVIDUAL-ACK-NOT-CUMULATIVE"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 2)
        c = raw(ctx, "consumer")
        try:
            id_header = c.dialect["message-id-header"]
            c.send("SUBSCRIBE", {"id": "s1", "destination": c.dialect.destination(q), "ack": "client-individual"})
            held: list[dict[str, str | None]] = []
            while len(held) < 2:
                f = c.next("MESSAGE")
                if f.command == "MESSAGE":
                    held.append({"id": f.headers.get(id_header), "ack": f.headers.get("ack")})
            ctx.history.add("consumer", "MESSAGE", f"{held}")
            c.send("ACK", {"id": held[1]["ack"] or "", "receipt": "ack-2"})
            receipt = c.next("RECEIPT to the ACK")  # frames are processed in order: the ACK was handled
            ctx.history.add("consumer", receipt.command, f"{receipt.headers}")
        finally:
            c.cut()
        ctx.history.add("consumer", "cut", "TCP reset, no DISCONNECT")
        ctx.await_consumers(q, 0)
        returned = [d.message_id for d in ctx.drain(q)]
        return {"published": published, "held": held, "acked": held[1]["id"], "returned": returned}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        first, second = obs["held"][0]["id"], obs["acked"]
        return holds(obs["returned"] == [first],
                     expected=f"after ACK of {second} only and a lost connection, {first} comes back and {second} does not: [{first!r}]",
                     observed=f"came back: {obs['returned']}")


class TestClientAckRedeliveredOnConnectionFailure(Case):
    """A delivery to an ack:client subscription, never acknowledged; the connection fails (reset).
    The server may deliver it to another client: this observes whether it does."""

    requirement = "STOMP-CLIENT-ACK-REDELIVER-ON-CONNECTION-FAILURE"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        c = raw(ctx, "consumer")
        try:
            c.send("SUBSCRIBE", {"id": "s1", "destination": c.dialect.destination(q), "ack": "client"})
            f = c.next("MESSAGE")
            held = f.headers.get(c.dialect["message-id-header"]) if f.command == "MESSAGE" else None
        finally:
            c.cut()
        ctx.history.add("consumer", "cut", "TCP reset, no DISCONNECT")
        ctx.await_consumers(q, 0)
        return {"published": published, "held": held, "returned": [d.message_id for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return holds(obs["returned"] == obs["published"],
                     expected=f"the unacknowledged {obs['published']} delivered to another client",
                     observed=f"another client received {obs['returned']}")


class TestSendErrorThenClose(Case):
    """A SEND without the destination header SEND requires: the server cannot process it, so it must
    answer ERROR and then close the connection."""

    requirement = "STOMP-SEND-ERROR-THEN-CLOSE"
    queue_types = (None,)  # no queue: one run, whatever queue types the broker has

    def scenario(self, ctx: CaseContext) -> Obs:
        c = raw(ctx, "client")
        try:
            c.send("SEND", {"receipt": "bad-send"}, b"no destination")
            closed, frames = c.closed_within(5.0)
        finally:
            c.close()
        seen = [{"command": f.command, "message": f.headers.get("message", ""), "receipt-id": f.headers.get("receipt-id")} for f in frames]
        ctx.history.add("client", "frames", f"{seen}; closed={closed}")
        return {"frames": seen, "closed": closed}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        commands = [f["command"] for f in obs["frames"]]
        ok = bool(commands) and commands[-1] == "ERROR" and "RECEIPT" not in commands and obs["closed"]
        return holds(ok, expected="an ERROR frame, then the connection closed by the server",
                     observed=f"frames {commands or 'none'}, connection {'closed' if obs['closed'] else 'still open after 5s'}")
