"""AMQP 1.0 messaging 3.5 (source and target), h2spec style: each case names the rule it checks.

3.5.3 outcomes: the outcomes the broker's source offers are valid outcome descriptors, and the
outcome it must support when it names none (accepted) settles a delivery for good. 3.5.3/3.5.4
dynamic: a node the broker creates at a receiver's (sender's) request is named in its source's
(target's) address, which should trace back to the link or the client's container; its
dynamic-node-properties are valid (3.5.9). A broker that does not create nodes refuses the link.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import TargetCannot
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds

#: The descriptors of the outcomes messaging 3.4 defines (3.4.2-3.4.5).
VALID = ("amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list")


class TestSourceOutcomesValid(Case):
    requirement = "LINK-SOURCE-OUTCOMES-VALID"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        published = ctx.publish(q, 1)
        session = ctx.session("receiver")
        receiver = session.receiver(q, credit=1)
        got = receiver.next(WAIT_S)
        session.ack(got.tag)
        session.sync()
        detach = receiver.detach(WAIT_S)
        return {"published": published, "outcomes": receiver.granted.get("outcomes"), "got": [delivery_obs(got)], "detach": detach,
                "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        offered = obs["outcomes"] or []
        bad = [o for o in offered if o not in VALID]
        return first_failure(
            holds(not bad, expected=f"the source's outcomes are outcome descriptors ({', '.join(VALID)})",
                  observed=f"outcomes {offered or 'not set'}", key=None if not bad else "invalid-outcome"),
            returned_exactly(obs["got"], obs["published"], what="on the link"),
            returned_exactly(obs["after"], [], what=f"after accepted (the source {'offering ' + ', '.join(offered) if offered else 'naming no outcomes'})"),
        )


#: The standard distribution modes (messaging 3.5.7) and lifetime policies (3.5.10-3.5.13, by descriptor).
DIST_MODES = ("move", "copy")
LIFETIME_POLICIES = ("amqp:delete-on-close:list", "amqp:delete-on-no-links:list", "amqp:delete-on-no-messages:list",
                     "amqp:delete-on-no-links-or-messages:list", 0x2B, 0x2C, 0x2D, 0x2E)
PROMPT_S = 3.0


def dynamic_nodes(ctx: CaseContext) -> Obs:
    """A receiving link with a dynamic source and a sending link with a dynamic target, each asked
    for with no address (messaging 3.5.3, 3.5.4); the broker's answers as data."""
    # A session each: a broker may end the session to refuse one of them.
    out = {"source": ctx.session("receiver").dynamic_attach("receiver", PROMPT_S), "target": ctx.session("sender").dynamic_attach("sender", PROMPT_S)}
    answers = [out[e].get("answer", "") for e in ("source", "target")]
    if all(a.startswith("refused") for a in answers):
        # Creating nodes on request is the broker's choice (3.5.3: a "request"); a detach refusing it is clean.
        raise TargetCannot(f"the broker refused both a dynamic source and a dynamic target ({answers[0]}; {answers[1]})",
                           kind="refused", refusal=f"dynamic attach answered: {answers[0]}")
    return out


def node_property_faults(props: Any) -> list[str]:
    """Breaches of 3.5.9 in a created node's dynamic-node-properties ([key, value] pairs)."""
    faults = []
    for key, value in props or []:
        if key == "lifetime-policy":
            code = value.get("descriptor") if isinstance(value, dict) else None
            if code not in LIFETIME_POLICIES:
                faults.append(f"lifetime-policy {value!r} is no lifetime policy")
        elif key == "supported-dist-modes":
            modes = value if isinstance(value, list) else [value]
            if not modes or any(not isinstance(m, str) for m in modes):
                faults.append(f"supported-dist-modes {value!r} is not one or more symbols")
    return faults


class TestDynamicNodeAddress(Case):
    requirement = "LINK-DYNAMIC-NODE-ADDRESS"

    def scenario(self, ctx: CaseContext) -> Obs:
        return dynamic_nodes(ctx)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        checks = []
        answered = [end for end in ("source", "target") if obs[end].get("answer") == "attached"]
        settled = all(obs[e].get("answer") == "attached" or str(obs[e].get("answer", "")).startswith("refused") for e in ("source", "target"))
        checks.append(holds(settled, expected="each dynamic attach answered: the node created, or the link refused with a detach",
                            observed=f"source: {obs['source'].get('answer')}; target: {obs['target'].get('answer')}",
                            key=None if settled else "dynamic-attach-unanswered"))
        for end in answered:
            a = obs[end]
            checks.append(holds(bool(a.get("address")), expected=f"the broker's {end} of the created node carries its address",
                                observed=f"{end} address {a.get('address')!r} (dynamic={str(a.get('dynamic')).lower()})", key=None if a.get("address") else f"{end}-address-unset"))
            faults = node_property_faults(a.get("properties"))
            checks.append(holds(not faults, expected=f"the {end}'s dynamic-node-properties are valid (3.5.9)", observed="; ".join(faults) or "valid",
                                key=None if not faults else f"{end}-node-properties"))
        return first_failure(*checks)


class TestDynamicAddressTraceable(Case):
    requirement = "LINK-DYNAMIC-ADDRESS-TRACEABLE"

    def scenario(self, ctx: CaseContext) -> Obs:
        return dynamic_nodes(ctx)

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        a = obs["source"] if obs["source"].get("answer") == "attached" or obs["target"].get("answer") != "attached" else obs["target"]
        address = str(a.get("address") or "")
        traceable = bool(address) and a["link"] in address and a["container"] in address
        return first_failure(
            holds(a.get("answer") == "attached", expected="a dynamic source created", observed=str(a.get("answer")), key="dynamic-source-" + str(a.get("answer")).split(" ")[0]),
            holds(traceable, expected=f"the generated address names the link ({a['link']}) and the client's container ({a['container']})",
                  observed=f"address {address!r}", key=None if traceable else "address-untraceable"),
        )
