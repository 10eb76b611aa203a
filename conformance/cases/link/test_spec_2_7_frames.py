"""AMQP 1.0 transport 2.6-2.7 and messaging 3.5.8 rules that need frames the proton engine never
sends, h2spec style: each case names the rule it checks. A frame-level client (the adapter's
``raw_connection``) sends them on a connection of its own; the broker's answers are its frames.

- flow echo (2.7.4): a flow with echo=true gets the broker's flow for the link, which itself does
  not ask for an echo back.
- delivery-count unknown (2.6.7): credit granted in a flow sent right after the attach, before the
  broker's attach arrived (so without a delivery-count), counts from the broker's initial one.
- settled on the first transfer only (2.7.5): the unset settled of the continuation is true.
- more with aborted, resume of an unknown delivery (2.7.5): neither puts a message in the queue.
- incomplete unsettled map (2.7.3): a receiver that attaches with incomplete-unsettled gets no new
  deliveries on that link, whatever credit it grants.
- filter-set (3.5.8): the filter the broker states it has in place has symbol keys and described
  (or null) values.
"""

from __future__ import annotations

import uuid
from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import Unsupported
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Outcome, Verdict, first_failure, holds
from conformance.unsupported import REFUSED

#: The broker owes its answer (an attach, a flow, a transfer it has credit for) at once.
PROMPT_S = 2.0


def raw(ctx: CaseContext) -> Any:
    """A frame-level connection through a recording proxy (its trace joins the report)."""
    opener = getattr(ctx.adapter, "raw_connection", None)
    if opener is None:
        raise Unsupported("the adapter has no frame-level client (AMQP 1.0 performatives)")
    proxy = ctx.proxy()
    conn = opener(proxy.url(ctx.url), timeout=PROMPT_S, name=f"conformance {ctx.requirement.id} raw")
    ctx.history.add("raw", "connect", f"frame-level connection via proxy :{proxy.port}")
    return conn


def broker_attach(frames: list[Any], handle: int | None = None) -> Any:
    return next((f for f in frames if f.name == "attach" and (handle is None or f.field(1) == handle)), None)


def finish(conn: Any) -> list[str]:
    log = list(conn.log)
    conn.close()
    return log


class TestFlowEcho(Case):
    requirement = "LINK-FLOW-ECHO"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        conn = raw(ctx)
        conn.attach(f"echo-{uuid.uuid4().hex[:6]}", 0, receiver=True, address=conn.address(q))
        attach = broker_attach(conn.read(lambda f: f.name == "attach"))
        if attach is None:
            return {"attach": "none", "flows": [], "log": finish(conn)}
        theirs = attach.field(1)
        conn.flow(0, delivery_count=attach.field(9), link_credit=0, echo=True)
        got = conn.read(lambda f: f.name == "flow" and f.field(4) == theirs, timeout=PROMPT_S)
        flows = [{"handle": f.field(4), "echo": bool(f.field(9)), "link-credit": f.field(6)} for f in got if f.name == "flow"]
        return {"attach": "answered", "flows": flows, "log": finish(conn)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        link = [f for f in obs["flows"] if f["handle"] is not None]
        return first_failure(
            holds(obs["attach"] == "answered", expected="the broker attaches the link", observed=f"attach: {obs['attach']}", key=None if obs["attach"] == "answered" else "no-attach"),
            holds(bool(link), expected=f"a flow of the link within {PROMPT_S:g}s of the client's flow with echo=true",
                  observed=f"flows: {obs['flows'] or 'none'}", key=None if link else "echo-unanswered"),
            holds(not any(f["echo"] for f in link), expected="the broker's answer does not itself ask for an echo (an endless loop)",
                  observed=f"flows: {link}", key=None if not any(f["echo"] for f in link) else "echo-answered-with-echo"),
        )


class TestCreditBeforeAttach(Case):
    requirement = "LINK-CREDIT-BEFORE-ATTACH"
    CREDIT, QUEUED = 1, 3

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, self.QUEUED)
        conn = raw(ctx)
        conn.attach(f"early-{uuid.uuid4().hex[:6]}", 0, receiver=True, address=conn.address(q))
        conn.flow(0, delivery_count=None, link_credit=self.CREDIT)  # before the broker's attach: no delivery-count known
        frames = conn.read(lambda f: False, timeout=PROMPT_S)  # all it sends within the deadline
        transfers = [f for f in frames if f.name == "transfer" and f.field(1) is not None]
        log = finish(conn)  # the connection's end releases what it held unsettled
        return {"published": published, "credit": self.CREDIT, "transfers": len(transfers),
                "attach": "answered" if broker_attach(frames) is not None else "none", "log": log,
                "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        n, credit = obs["transfers"], obs["credit"]
        return first_failure(
            holds(obs["attach"] == "answered", expected="the broker attaches the link", observed=f"attach: {obs['attach']}", key=None if obs["attach"] == "answered" else "no-attach"),
            holds(n == credit, expected=f"{credit} transfer(s) for the {credit} credit granted before the broker's attach, counted from its initial delivery-count",
                  observed=f"{n} transfer(s) within {PROMPT_S:g}s", key=None if n == credit else "early-credit-ignored" if n < credit else "transfers-beyond-credit"),
            returned_exactly(obs["after"], obs["published"], what="in the queue once the connection ended (nothing was settled)"),
        )


def _sender(ctx: CaseContext, conn: Any, q: str, *, mixed: bool = False) -> str:  # noqa: ARG001
    """Attach a sending link (handle 0) and wait for its credit; "ready" or what happened."""
    conn.attach(f"s-{uuid.uuid4().hex[:6]}", 0, receiver=False, address=conn.address(q), snd_settle_mode=2 if mixed else 0)
    got = conn.read(lambda f: f.name == "flow" and f.field(4) is not None and (f.field(6) or 0) > 0)
    if not got or got[-1].name != "flow":
        return "no credit: " + ", ".join(f.name for f in got)
    return "ready"


def _dispositions(frames: list[Any]) -> list[tuple[int, int, bool]]:
    return [(int(f.field(1)), int(f.field(2) if f.field(2) is not None else f.field(1)), bool(f.field(3))) for f in frames if f.name == "disposition"]


class TestSettledContinuation(Case):
    requirement = "LINK-SETTLED-CONTINUATION"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        conn = raw(ctx)
        ready = _sender(ctx, conn, q, mixed=True)
        if ready != "ready":
            return {"ready": ready, "dispositions": [], "log": finish(conn), "after": [], "published": []}
        whole = conn.message(b"m1", "m1")
        half = len(whole) // 2
        conn.transfer(0, 0, b"t1", whole[:half], settled=True, more=True)  # settled on the first transfer only
        conn.transfer(0, None, None, whole[half:])  # settled unset: true, as on a preceding transfer
        conn.transfer(0, 1, b"t2", conn.message(b"m2", "m2"))  # unsettled: its disposition is the barrier
        frames = conn.read(lambda f: f.name == "disposition" and int(f.field(1)) <= 1 <= int(f.field(2) if f.field(2) is not None else f.field(1)))
        log = finish(conn)
        return {"ready": ready, "dispositions": _dispositions(frames), "log": log, "published": ["m1", "m2"],
                "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        d = obs["dispositions"]
        for_m1 = [x for x in d if x[0] <= 0 <= x[1]]
        for_m2 = [x for x in d if x[0] <= 1 <= x[1]]
        return first_failure(
            holds(obs["ready"] == "ready", expected="a sending link with credit", observed=obs["ready"], key=None if obs["ready"] == "ready" else "no-credit"),
            holds(bool(for_m2), expected="a disposition for m2, sent unsettled after m1", observed=f"dispositions {d or 'none'}", key=None if for_m2 else "no-disposition"),
            holds(not for_m1, expected="no disposition for m1: settled on its first transfer, its continuation (settled unset) is settled too",
                  observed=f"dispositions covering m1: {for_m1}", key=None if not for_m1 else "continuation-taken-unsettled"),
            returned_exactly(obs["after"], obs["published"], what="in the queue"),
        )


class TestMoreWithAborted(Case):
    requirement = "LINK-ABORTED-MORE-IGNORED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        conn = raw(ctx)
        ready = _sender(ctx, conn, q)
        if ready != "ready":
            return {"ready": ready, "then": "", "log": finish(conn), "after": [], "published": []}
        conn.transfer(0, 0, b"t1", conn.message(b"m-aborted", "m-aborted"), more=True)
        conn.transfer(0, None, None, b"", more=True, aborted=True)  # more and aborted: aborted wins
        conn.transfer(0, 1, b"t2", conn.message(b"m1", "m1"))
        frames = conn.read(lambda f: f.name == "disposition" and int(f.field(1)) <= 1 <= int(f.field(2) if f.field(2) is not None else f.field(1)))
        then = "m1 settled" if any(f.name == "disposition" for f in frames) else "no disposition for m1: " + ", ".join(f.brief()[:160] for f in frames[-2:])
        log = finish(conn)
        return {"ready": ready, "then": then, "log": log, "published": ["m1"], "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            holds(obs["ready"] == "ready", expected="a sending link with credit", observed=obs["ready"], key=None if obs["ready"] == "ready" else "no-credit"),
            holds(obs["then"] == "m1 settled", expected="a whole message after the aborted one (more and aborted set) is taken",
                  observed=obs["then"], key=None if obs["then"] == "m1 settled" else "next-message-refused"),
            returned_exactly(obs["after"], obs["published"], what="in the queue after the aborted delivery and m1"),
        )


class TestResumeUnknownIgnored(Case):
    requirement = "LINK-RESUME-UNKNOWN-IGNORED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        conn = raw(ctx)
        ready = _sender(ctx, conn, q)
        if ready != "ready":
            return {"ready": ready, "dispositions": [], "log": finish(conn), "after": [], "published": []}
        conn.transfer(0, 0, b"never-sent", conn.message(b"m-resumed", "m-resumed"), resume=True)  # in no unsettled map
        conn.transfer(0, 1, b"t2", conn.message(b"m1", "m1"))
        frames = conn.read(lambda f: f.name == "disposition" and int(f.field(1)) <= 1 <= int(f.field(2) if f.field(2) is not None else f.field(1)))
        log = finish(conn)
        return {"ready": ready, "dispositions": _dispositions(frames), "ended": [f.brief()[:200] for f in frames if f.name in ("detach", "end", "close")],
                "log": log, "published": ["m1"], "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return first_failure(
            holds(obs["ready"] == "ready", expected="a sending link with credit", observed=obs["ready"], key=None if obs["ready"] == "ready" else "no-credit"),
            returned_exactly(obs["after"], obs["published"], what="in the queue after a resumed transfer of a delivery the broker never had, and m1"),
        )


class TestIncompleteUnsettled(Case):
    requirement = "LINK-INCOMPLETE-UNSETTLED-NO-NEW"
    QUEUED = 2

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, self.QUEUED)
        conn = raw(ctx)
        conn.attach(f"inc-{uuid.uuid4().hex[:6]}", 0, receiver=True, address=conn.address(q), unsettled={}, incomplete=True)
        frames = conn.read(lambda f: f.name in ("attach", "detach"))
        attach = broker_attach(frames)
        if attach is not None and not any(f.name == "detach" for f in frames):
            conn.flow(0, delivery_count=attach.field(9), link_credit=self.QUEUED)
            frames += conn.read(lambda f: f.name == "detach", timeout=PROMPT_S)  # new deliveries would come now
        new = [f.brief()[:160] for f in frames if f.name == "transfer" and not f.field(8)]
        ended = [f.brief()[:200] for f in frames if f.name in ("detach", "end", "close")]
        log = finish(conn)
        return {"published": published, "attach": "answered" if attach is not None else "none", "new": new, "log": log, "ended": ended,
                "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        refused = [e for e in obs.get("ended", []) if "amqp:not-implemented" in e]
        if refused and not obs["new"]:
            # Link recovery (an attach carrying an unsettled map) is optional: a broker that declines
            # it with amqp:not-implemented never had an incomplete map put to it.
            return Verdict(Outcome.UNSUPPORTED, expected="an attach with unsettled {} and incomplete-unsettled=true taken, and no new delivery on it",
                           observed=f"the attach answered by {refused[0]}",
                           reason="the broker declines link recovery (an attach carrying an unsettled map) with amqp:not-implemented",
                           unsupported_kind=REFUSED, key="refused-not-implemented")
        # Without the broker's attach nothing was put to it: no transfer then proves nothing.
        return first_failure(
            holds(obs["attach"] == "answered", expected=f"the broker answers the attach (with unsettled {{}}, incomplete-unsettled=true) within {PROMPT_S:g}s",
                  observed=f"attach: {obs['attach']}" + (f" ({obs['ended']})" if obs.get("ended") else ""), key=None if obs["attach"] == "answered" else "no-attach"),
            holds(not obs["new"], expected="no new delivery (resume unset) on a link the receiver attached with an incomplete unsettled map",
                  observed=f"{len(obs['new'])} new: {obs['new'][:2]}", key=None if not obs["new"] else "new-deliveries-sent"),
            returned_exactly(obs["after"], obs["published"], what="in the queue afterwards"),
        )


#: A JMS selector filter (the AMQP filter registry's apache.org:selector-filter:string).
SELECTOR = "apache.org:selector-filter:string"


class TestFilterSetValid(Case):
    requirement = "LINK-FILTER-SET-VALID"

    def scenario(self, ctx: CaseContext) -> Obs:
        from_raw = raw(ctx)
        q = ctx.queue()
        filter_ = from_raw.selector_filter("colour = 'red'")
        from_raw.attach(f"flt-{uuid.uuid4().hex[:6]}", 0, receiver=True, address=from_raw.address(q), filter_=filter_)
        attach = broker_attach(from_raw.read(lambda f: f.name == "attach"))
        in_place = None if attach is None else from_raw.source_filter(attach)
        return {"attach": "answered" if attach is not None else "none", "filter": in_place, "log": finish(from_raw)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        entries = obs["filter"] or []
        bad = [e for e in entries if e["key-type"] != "symbol" or e["value-type"] not in ("described", "null")]
        return first_failure(
            holds(obs["attach"] == "answered", expected="the broker attaches the link", observed=f"attach: {obs['attach']}", key=None if obs["attach"] == "answered" else "no-attach"),
            holds(not bad, expected="the filter in place (the broker's source) has symbol keys and described or null values",
                  observed=f"filter {entries or 'none in place'}", key=None if not bad else "filter-set-invalid"),
        )
