"""AMQP 1.0 transport 2.7 (the performatives' fields), h2spec style: each case names the rules it checks.

One exchange runs through a recording proxy with a small max-frame-size, so that messages span
several transfer frames both ways: three 10 kB messages sent on a sending link (the broker is the
receiver and grants credit), then received on a receiving link with credit 3 (the broker is the
sender), accepted, and drained. The adapter decodes the recorded frames (``performative``); the
verdicts read the broker's frames only:

- attach (2.7.3): a sending endpoint's initial-delivery-count is set; a fresh attach (no link is
  ever resumed here) carries no unsettled map, so none with a null key.
- transfer (2.7.5, 2.6.14): the first transfer of each delivery carries its delivery-id and
  delivery-tag, continuations keep the tag, and a link never interleaves two deliveries.
- flow (2.7.4): a flow without a handle carries no link state; the broker's flow as a link's sender
  states its delivery-count (initial + transfers sent); as a receiver, the last delivery-count it
  can know of the client's sender (at most the initial + the transfers forwarded to it so far, never
  going back).
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost, OperationTimeout
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds
from conformance.secrets import SecretUrl

#: Small enough that a 10 kB message takes three transfer frames or more.
FRAME = 4096
BODY = 10_000
MESSAGES = 3
PROMPT_S = 3.0
MOD = 1 << 32


def exchange(ctx: CaseContext) -> Obs:
    """Run the exchange through a recording proxy; the broker's and the client's link frames, decoded."""
    decode = getattr(ctx.adapter, "performative", None)
    if decode is None:
        from conformance.errors import Unsupported

        raise Unsupported("the adapter cannot decode the frames it exchanged (AMQP 1.0 performatives)")
    q = ctx.queue()
    proxy = ctx.proxy()
    conn = ctx.connect("client", via=proxy, url=SecretUrl(ctx.url).with_query({"max-frame-size": FRAME}))
    ids = [f"m{i}" for i in range(1, MESSAGES + 1)]
    got: list[Any] = []
    drain = "not tried"
    ended = None
    try:
        session = conn.session()
        session.enable_confirms()
        for mid in ids:
            session.publish(q, (mid + ":").encode() + b"x" * BODY, message_id=mid)
        receiver = session.receiver(q, credit=MESSAGES)
        receiver.received(MESSAGES, WAIT_S)
        got = list(receiver.buffer)
        receiver.buffer.clear()
        for d in got:
            session.ack(d.tag)
        try:  # the broker's answer is a flow of the link's sender: its delivery-count
            receiver.drain(2, PROMPT_S)
            drain = "answered"
        except OperationTimeout:
            drain = f"no answer within {PROMPT_S:g}s"
        except ChannelClosed as exc:  # the drain comes last: what the other checks read was sent before
            drain = f"session ended: {exc.text}"[:300]
        if drain == "answered":
            receiver.detach(PROMPT_S)
    except (ChannelClosed, ConnectionLost) as exc:
        # The client library may refuse a malformed frame itself (a changed tag, an interleaved
        # delivery): what the broker sent up to then is in the recording all the same.
        ended = f"{type(exc).__name__}: {exc}"[:300]
    frames: list[dict[str, Any]] = []
    for e in proxy.trace.entries():
        if e.note or e.frame is None or e.name not in ("attach", "flow", "transfer", "disposition", "detach"):
            continue
        decoded = decode(e.frame.raw)
        if decoded is not None:
            frames.append({"from": e.sender, "conn": e.conn, "ch": e.channel, **decoded})
    return {"published": ids, "got": [delivery_obs(d) for d in got], "drain": drain, "ended": ended, "frames": frames}


def _broker(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["from"] == "server"]


def transfer_faults(frames: list[dict[str, Any]]) -> list[str]:
    """Every breach of 2.7.5 delivery-id/delivery-tag and 2.6.14 interleaving in the broker's transfers."""
    faults: list[str] = []
    open_: dict[tuple[int, int, int], dict[str, Any]] = {}  # (conn, channel, handle) -> the delivery under way
    for f in _broker(frames):
        if f["name"] != "transfer":
            continue
        link = (f["conn"], f["ch"], f["handle"])
        cur = open_.get(link)
        if cur is None:
            if f["delivery-id"] is None:
                faults.append(f"first transfer on handle {f['handle']} without a delivery-id")
            if f["delivery-tag"] is None:
                faults.append(f"first transfer of delivery {f['delivery-id']} without a delivery-tag")
            cur = {"id": f["delivery-id"], "tag": f["delivery-tag"]}
        else:
            if f["delivery-id"] is not None and f["delivery-id"] != cur["id"]:
                faults.append(f"delivery {f['delivery-id']} begun on handle {f['handle']} while delivery {cur['id']} was under way (interleaved)")
                cur = {"id": f["delivery-id"], "tag": f["delivery-tag"]}
            elif f["delivery-tag"] is not None and f["delivery-tag"] != cur["tag"]:
                faults.append(f"continuation of delivery {cur['id']} with delivery-tag {f['delivery-tag']}, not {cur['tag']}")
        if f["more"] and not f["aborted"]:
            open_[link] = cur
        else:
            open_.pop(link, None)
    return faults


def attach_faults(frames: list[dict[str, Any]]) -> list[str]:
    """Every breach of 2.7.3 initial-delivery-count and unsettled in the broker's attaches."""
    faults: list[str] = []
    for f in _broker(frames):
        if f["name"] != "attach":
            continue
        if f["role"] == "sender" and f["initial-delivery-count"] is None:
            faults.append(f"attach {f['link']!r} (role sender) without initial-delivery-count")
        for end in ("source", "target"):
            node = f.get(f"{end}-dynamic-node-properties")
            if node is not None and not node["dynamic"] and node["properties"] is not None:
                faults.append(f"attach {f['link']!r}: a {end} that is not dynamic with dynamic-node-properties {node['properties']}")
        if f["unsettled"] is not None:
            nulls = " (with a null key)" if None in f["unsettled"] else ""
            faults.append(f"attach {f['link']!r} (a fresh attach, not resuming) with an unsettled map of {len(f['unsettled'])}{nulls}")
    return faults


def flow_faults(frames: list[dict[str, Any]]) -> tuple[list[str], int]:
    """Every breach of 2.7.4 delivery-count (and link fields without a handle) in the broker's flows;
    and how many of its link flows were judged."""
    faults: list[str] = []
    judged = 0
    roles: dict[tuple[int, int, int], str] = {}  # the broker's (conn, channel, handle) -> its role
    by_name: dict[tuple[int, str], dict[str, Any]] = {}  # (conn, link name) -> the client's attach
    client_handle: dict[tuple[int, int], tuple[int, int]] = {}  # client's (conn, handle) -> (its initial count, transfers so far)
    names_of_broker: dict[tuple[int, int, int], str] = {}
    sent: dict[tuple[int, int, int], int] = {}  # the broker's link -> transfers it began
    initial: dict[tuple[int, int, int], int] = {}
    last_rcv: dict[tuple[int, int, int], int] = {}
    advanced: dict[tuple[int, int, int], int] = {}  # the broker's sending link -> delivery-count a drain advanced it by
    under_way: set[tuple[str, int, int, int]] = set()  # (who, conn, channel, handle) with a delivery's transfers still to come
    for f in frames:
        if f["name"] == "attach":
            if f["from"] == "client":
                by_name[(f["conn"], f["link"])] = f
                client_handle[(f["conn"], f["handle"])] = (f["initial-delivery-count"] or 0, 0)
            else:
                key = (f["conn"], f["ch"], f["handle"])
                roles[key] = f["role"]
                names_of_broker[key] = f["link"]
                if f["initial-delivery-count"] is not None:
                    initial[key] = f["initial-delivery-count"]
            continue
        if f["name"] == "transfer":
            link = (f["from"], f["conn"], f["ch"], f["handle"])
            new = link not in under_way  # a delivery's first transfer, not a continuation (which may repeat the id)
            if f["more"] and not f["aborted"]:
                under_way.add(link)
            else:
                under_way.discard(link)
            if not new:
                continue
            if f["from"] == "client":
                ch = client_handle.get((f["conn"], f["handle"]))
                if ch is not None:
                    client_handle[(f["conn"], f["handle"])] = (ch[0], ch[1] + 1)
            else:
                key = (f["conn"], f["ch"], f["handle"])
                sent[key] = sent.get(key, 0) + 1
            continue
        if f["name"] != "flow" or f["from"] != "server":
            continue
        if f["handle"] is None:
            stray = [k for k in ("delivery-count", "link-credit", "available") if f[k] is not None]
            if stray:
                faults.append(f"a session flow (no handle) carrying {', '.join(stray)}")
            continue
        key = (f["conn"], f["ch"], f["handle"])
        role, count = roles.get(key), f["delivery-count"]
        if role == "sender":
            judged += 1
            base = initial.get(key, 0) + sent.get(key, 0)
            want = (base + advanced.get(key, 0)) % MOD
            name = names_of_broker.get(key)
            if count is None:
                faults.append(f"flow of the broker's sending link {name!r} without a delivery-count")
            elif f["drain"]:  # a drain advances the count past the transfers, by the credit it used up
                if count < want:
                    faults.append(f"drain answer of the broker's sending link {name!r}: delivery-count {count}, below initial "
                                  f"{initial.get(key, 0)} + {sent.get(key, 0)} transfers sent")
                else:
                    advanced[key] = count - base
            elif count != want:
                faults.append(f"flow of the broker's sending link {name!r}: delivery-count {count}, not initial "
                              f"{initial.get(key, 0)} + {sent.get(key, 0)} transfers sent" + (f" + {advanced[key]} drained" if advanced.get(key) else ""))
        elif role == "receiver":
            judged += 1
            mine = by_name.get((f["conn"], names_of_broker.get(key, "")))
            if mine is None:
                continue
            start, forwarded = client_handle.get((f["conn"], mine["handle"]), (0, 0))
            if count is None:
                faults.append(f"flow of the broker's receiving link {names_of_broker.get(key)!r} without the delivery-count it knows")
            elif not (start <= count <= start + forwarded) or count < last_rcv.get(key, start):
                faults.append(f"flow of the broker's receiving link {names_of_broker.get(key)!r}: delivery-count {count}, while the client's "
                              f"sender started at {start} and {forwarded} transfers had reached the broker (last stated {last_rcv.get(key, start)})")
            else:
                last_rcv[key] = count
    return faults, judged


class _Wire:
    """The scenario and the delivery check the four cases on the recorded exchange share (a mixin:
    no case of its own)."""

    def scenario(self, ctx: CaseContext) -> Obs:
        return exchange(ctx)

    def delivered(self, obs: Obs) -> Verdict:
        if obs.get("ended"):
            return holds(False, expected="the exchange completes", observed=f"it ended: {obs['ended']}", key="exchange-ended")
        return returned_exactly(obs["got"], obs["published"], what="through the recording proxy")


def settlement_faults(frames: list[dict[str, Any]]) -> tuple[list[str], int, list[Any]]:
    """Every delivery the client sent unsettled on its sending link (rcv-settle-mode first) that the
    broker did not settle at once: no disposition of its covering it, or a first one not settled.
    Also how many were judged, and the settled field of the client's first transfers as sent."""
    faults: list[str] = []
    ids: list[int] = []
    first_settled: list[Any] = []
    under_way: set[tuple[int, int, int]] = set()
    for f in frames:
        if f["from"] != "client" or f["name"] != "transfer":
            continue
        link = (f["conn"], f["ch"], f["handle"])
        if link not in under_way and not f["settled"]:
            ids.append(f["delivery-id"])
            first_settled.append(f["settled"])
        if f["more"] and not f["aborted"]:
            under_way.add(link)
        else:
            under_way.discard(link)
    for i in ids:
        covering = [f for f in frames if f["from"] == "server" and f["name"] == "disposition" and f["role"] == "receiver"
                    and f["first"] is not None and f["first"] <= i <= (f["last"] if f["last"] is not None else f["first"])]
        if not covering:
            faults.append(f"delivery {i}: no disposition from the broker")
        elif not covering[0]["settled"]:
            faults.append(f"delivery {i}: the broker's first disposition is not settled (state {covering[0]['state']})")
    return faults, len(ids), first_settled


class TestReceiverSettlesFirst(_Wire, Case):
    requirement = "LINK-RECEIVER-SETTLES-FIRST"

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        faults, n, first = settlement_faults(obs["frames"])
        return first_failure(
            holds(n > 0, expected="the client's unsettled transfers recorded", observed=f"{n} deliveries", key=None if n else "no-transfer-recorded"),
            holds(not faults, expected=f"under rcv-settle-mode first, the broker settles each of the {n} deliveries sent unsettled "
                                      f"(settled field as sent: {sorted({str(x).lower() for x in first})}) with its first disposition",
                  observed="; ".join(faults[:3]) or "none", key=None if not faults else "not-settled-first" if "not settled" in faults[0] else "no-disposition"),
            self.delivered(obs),
        )


class TestTransferFields(_Wire, Case):
    requirement = "LINK-TRANSFER-FIELDS"

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        faults = transfer_faults(obs["frames"])
        n = sum(1 for f in obs["frames"] if f["from"] == "server" and f["name"] == "transfer")
        return first_failure(
            holds(not faults, expected=f"each delivery's first transfer carries delivery-id and delivery-tag, no delivery interleaved on a link ({n} transfers)",
                  observed="; ".join(faults[:3]) or "none", key=None if not faults else faults[0].split(" ")[0] + "-" + ("interleaved" if "interleaved" in faults[0] else "field")),
            self.delivered(obs),
        )


class TestAttachState(_Wire, Case):
    requirement = "LINK-ATTACH-STATE"

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        faults = attach_faults(obs["frames"])
        n = sum(1 for f in obs["frames"] if f["from"] == "server" and f["name"] == "attach")
        return first_failure(
            holds(n > 0, expected="the broker's attaches recorded", observed=f"{n} attaches", key=None if n else "no-attach-recorded"),
            holds(not faults, expected=f"the broker's {n} attaches: initial-delivery-count set where it sends, no unsettled map on a fresh attach",
                  observed="; ".join(faults[:3]) or "none", key=None if not faults else "initial-delivery-count" if "initial" in faults[0] else "unsettled-map"),
            self.delivered(obs),
        )


class TestFlowState(_Wire, Case):
    requirement = "LINK-FLOW-STATE"

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        faults, judged = flow_faults(obs["frames"])
        return first_failure(
            holds(judged > 0, expected="the broker's link flows recorded", observed=f"{judged} link flows", key=None if judged else "no-flow-recorded"),
            holds(not faults, expected=f"the broker's {judged} link flows state the delivery-count (2.7.4); session flows carry no link state",
                  observed="; ".join(faults[:3]) or "none", key=None if not faults else _flow_key(faults[0])),
            self.delivered(obs),
        )


def _flow_key(fault: str) -> str:
    """The observation key of the first breach: a missing count is told apart from a wrong one, so
    a profile that documents a broker leaving the field out never covers a count that is wrong."""
    if "no handle" in fault:
        return "session-flow-link-state"
    if "receiving link" in fault and "without the delivery-count" in fault:
        return "receiver-flow-without-delivery-count"
    if "sending link" in fault and "without a delivery-count" in fault:
        return "sender-flow-without-delivery-count"
    return "delivery-count"
