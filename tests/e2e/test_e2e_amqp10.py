"""End to end over AMQP 1.0: the shared catalogue and the link area through the proton adapter
against RabbitMQ's AMQP 1.0 endpoint (the bundled plugin on the private node), beside AMQP 0-9-1."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.amqp10.proton_adapter import ProtonAdapter
from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance import yamlio
from conformance.api import ServerInfo
from conformance.cases import all_cases
from conformance.catalogue.capabilities import applicability, server_capabilities
from conformance.catalogue.profiles import select_profile
from conformance.catalogue.requirements import catalogue
from conformance.cli import EXIT_OK
from conformance.runner.results import read_results, read_run
from tests.e2e.seed_brokers import cell_of
from tests.e2e.test_e2e_rabbitmq import run_cli
from tests.support.known_bugs import known_bug_fail

PROFILE = select_profile("RabbitMQ", "3.10.8", "amqp-1.0")
#: The fails the review kept on this node over AMQP 1.0, cell -> why (docs/findings/rabbitmq-3.10.8-amqp10.md).
KEPT_FAILS = {str(k): str(v) for k, v in yamlio.safe_load(
    (Path(__file__).parent / "kept_fails" / "rabbitmq-3.10.8-amqp10.yaml").read_text())["cells"].items()}


@pytest.mark.timeout(960)  # the whole 1.0 catalogue on the node: its own limit (900 s) decides
def test_catalogue_through_the_proton_adapter(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    out = tmp_path / "amqp10"
    proc = run_cli("run", "--target", rabbit.url, "--adapter", "proton", "--out", str(out), "--workers", "2",
                   timeout=900)  # ~435 s beside the other long files; 480 s was not enough with both self-tests at once
    # 1: the kept fails are MUST requirements the plugin breaks
    assert proc.returncode in (EXIT_OK, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    run = read_run(out)
    assert (run["protocol"], run["profile"], run["status"]) == ("amqp-1.0", "rabbitmq-3.10-amqp10", "finished")
    recs = list(read_results(out))
    assert recs and all(r["protocol"] == "amqp-1.0" and r["adapter"] == "proton" for r in recs)
    reqs = catalogue()
    disruptive = {c.requirement for c in all_cases() if c.disrupts_broker}
    ran_10 = set()
    # what applies is what the adapter offers against this server: the protocol's capabilities and the
    # admin backend's (queue arguments, exchanges and durability through the 0-9-1 side session)
    adapter = ProtonAdapter()
    offered = server_capabilities(adapter, ServerInfo("RabbitMQ", "3.10.8", "amqp-1.0"))
    for r in recs:
        applies = applicability(reqs[r["requirement"]], adapter, PROFILE, offered) is None
        if r["verdict"] == "unsupported":
            documented = PROFILE.unsupported_reason(r["requirement"], r["queue_type"])
            assert r["unsupported_kind"] in ("cannot-express", "refused", "no-fault"), r
            # a documented refusal is seen on the wire and recorded, never taken on the profile's word
            # (the runner's words, or the case's own record of the answer: a 406 at queue.declare, an attach ended)
            assert r["unsupported_kind"] != "refused" or (r["observed"] and r["observed"] != "not run"), r
            assert (not applies and "does not apply to amqp-1.0" in r["reason"]) or (
                documented is not None and documented.kind == "refused" and r["unsupported_kind"] == "refused") or (
                # the broker's own refusal in the protocol (attach outcomes, amqp:not-implemented), recorded above
                r["unsupported_kind"] == "refused") or (
                documented is not None and r["reason"] == documented.reason) or (
                r["requirement"] in disruptive and "cannot be restarted" in r["reason"]) or (
                # a node-loss case on a single node: the target cannot take the fault
                r["requirement"] in disruptive and r["unsupported_kind"] == "no-fault") or (
                r["requirement"] == "LINK-UNRELIABLE-NO-SETTLE" and "not tested" in r["reason"]) or (
                # a queue only the admin's 0-9-1 side session could declare (an exclusive queue would be
                # that connection's, not the AMQP 1.0 connection's): the target says so
                r["unsupported_kind"] == "cannot-express" and "the admin's AMQP 0-9-1 side connection" in r["reason"]) or (
                # the adapter names what AMQP 1.0 cannot carry for this case (consumer arguments, ...)
                r["unsupported_kind"] == "cannot-express" and r["reason"].startswith("adapter proton: ")) or (
                # the variant routes by a fanout exchange, which an AMQP 1.0 sender cannot address
                r["variant"] == "fanout-two-queues" and "exchanges" in r["reason"] and r["unsupported_kind"] == "cannot-express"), r
        else:
            assert applies, r
            # a profile's known bug (open upstream) stays a fail, with its reference; so does a fail the
            # review kept; no other fail
            assert r["verdict"] in ("pass", "deviation") or known_bug_fail(r) or (
                r["verdict"] == "fail" and cell_of(r) in KEPT_FAILS), (r["case_id"], r["verdict"], r["observed"])
            ran_10.add(r["requirement"])
    # A kept fail that no longer fails (the broker or the case changed) is reviewed, not absorbed.
    fails = {cell_of(r) for r in recs if r["verdict"] == "fail"}
    assert sorted(set(KEPT_FAILS) - fails) == [], "kept fails that did not fail: review them in tests/e2e/kept_fails/"
    # The shared requirements really ran over AMQP 1.0, not only the link area.
    assert {"ACK-REDELIVER-ON-CONNECTION-LOSS", "ACK-ACKED-NEVER-REDELIVERED", "NACK-SINGLE-REQUEUE", "NACK-DISCARD",
            "ACK-CLIENT-CUMULATIVE", "ACK-MULTIPLE-UP-TO-TAG", "PREFETCH-LIMIT", "LINK-UNRELIABLE-GONE-AT-FETCH", "LINK-ACK-SYNC"} <= ran_10
    got = {(r["requirement"], r["queue_type"]): r for r in recs if r["variant"] is None}
    # What 3.10.8's plugin does differently is reported as documented deviations with their citation.
    for qt in ("classic", "quorum"):
        browse = got[("LINK-BROWSE-NON-DESTRUCTIVE", qt)]
        assert browse["verdict"] == "deviation" and "copy" in browse["reason"] and browse["citation"]
        assert got[("LINK-DRAIN", qt)]["verdict"] == "deviation"
    assert "7141" in got[("LINK-DRAIN", "classic")]["citation"]
    # Transactions: the plugin refuses the coordinator; the profile says so.
    tx = [r for r in recs if r["requirement"] == "TX-PUBLISH-VISIBLE-AFTER-COMMIT"]
    assert tx and all(r["verdict"] == "unsupported" and "coordinator" in r["reason"] and r["unsupported_kind"] == "refused"
                      and "amqp:not-implemented" in r["observed"] for r in tx)


def test_the_same_requirement_compares_across_protocols(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    """One requirement id, two protocols: both result sets carry it with their protocol beside it."""
    outs = {}
    for adapter in ("pika", "proton"):
        outs[adapter] = tmp_path / adapter
        proc = run_cli("run", "--target", rabbit.url, "--adapter", adapter, "--area", "link", "--out", str(outs[adapter]))
        # over AMQP 1.0 the link area holds the plugin's kept MUST fails (aborted and resumed transfers)
        assert proc.returncode in ((EXIT_OK,) if adapter == "pika" else (EXIT_OK, 1)), proc.stdout[-2000:] + proc.stderr[-2000:]
    by = {a: {(r["requirement"], r["queue_type"], r["variant"]): r for r in read_results(o)} for a, o in outs.items()}
    shared = set(by["pika"]) & set(by["proton"])
    assert ("LINK-UNRELIABLE-NO-SETTLE", "classic", "release") in shared
    for key in shared:
        assert (by["pika"][key]["protocol"], by["proton"][key]["protocol"]) == ("amqp-0-9-1", "amqp-1.0")
    # The refusal is the broker's over 0-9-1 (406); over 1.0 the frame-level client puts the
    # disposition of a delivery sent settled on the wire, and the plugin ignores it (2.6.12): a pass
    # judged on what came back, never the client refusing before the wire.
    k = ("LINK-UNRELIABLE-NO-SETTLE", "classic", "release")
    assert by["pika"][k]["observations"]["answer"]["refused_by"] == "broker"
    assert by["proton"][k]["verdict"] == "pass", by["proton"][k]["observed"]


def test_adapter_check_passes_for_pika_and_proton(rabbit: RabbitMQLocalNode) -> None:
    """The adapter kit's contract check holds for both AMQP adapters on the same node
    (proton's transactions are 'not offered': the 3.10 plugin refuses the coordinator)."""
    from adapters.amqp091.pika_adapter import PikaAdapter
    from conformance.cli.adapter_check import check

    for adapter in (PikaAdapter(), ProtonAdapter()):
        results = check(adapter, rabbit.url)
        assert [r.line() for r in results if r.outcome == "broken"] == [], adapter.name
        assert len(results) == 15
