"""A whole soak: the target launched (or given), the clients behind the fault proxy when a cut is
scheduled, the workload and nemesis (conformance.soak.runner), the checkers on the history, and
OUT/soak.json. :func:`execute` is what ``conformance soak`` calls; tests call it with a target of
their own (already started: it is not stopped)."""

from __future__ import annotations

import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from conformance.api import adapter_for
from conformance.errors import ConformanceError, TargetError, UsageError
from conformance.secrets import SecretUrl, redact, register_url, scrub
from conformance.soak.checkers import CheckOptions, run_all
from conformance.soak.documented import annotate
from conformance.soak.history import problems as history_problems
from conformance.soak.history import read_history
from conformance.soak.runner import HistoryWriter, Soak, SoakOptions, queue_spec, write_json

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
#: On a cluster target: an ack sent within this long before a node fault began (or during it) may
#: have reached its consumer's node and not the queue's leader (seen here: acks sent 1-95 ms before
#: a partition's cut redelivered once the leader declared the node down).
ACK_IN_FLIGHT_S = 1.0


def _plain(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return {k: _plain(v) for k, v in asdict(x).items()}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def execute(spec: str | None, options: SoakOptions, out: Path, *, target: Any = None, adapter_name: str | None = None,
            say: Any = print) -> tuple[int, dict[str, Any]]:
    """Run one soak into ``out``; the exit code (0 every checker passed, 1 one failed, 2 the run
    broke) and soak.json's content. ``spec``: a --target value to launch or attach (stopped at the
    end); or ``target``: a started Target the caller owns."""
    from conformance.catalogue.profiles import profile_on
    from conformance.kit.redelivery import signal_of
    from conformance.nemesis.kinds import KINDS, fault_applicability
    from conformance.soak.documented import refusal
    from conformance.targets import make_target

    out.mkdir(parents=True, exist_ok=True)
    owned = target is None
    stats = None
    if owned:
        assert spec is not None
        register_url(spec)
        target = make_target(spec, run_dir=str(out))
    kinds = sorted({e["kind"] for e in options.schedule} | set(options.nemesis))
    cluster = is_cluster(target)
    fault_kinds = soak_kinds(kinds, cluster)
    if "partition" in fault_kinds:  # refused before a cluster boots when this machine cannot cut links
        unusable = getattr(target, "partition_unusable", None)
        if unusable is not None and unusable():
            raise UsageError(f"the nemesis cannot act on this target: {fault_kinds['partition'].cannot_take(target)}")
    why = fault_applicability([k for n, k in fault_kinds.items() if n != "cut"], target) if not cluster else None
    if why:
        raise UsageError(f"the nemesis cannot act on this target: {why}")
    started = False
    proxies: list[Any] = []
    try:
        if owned:
            target.start()
            started = True
        if cluster:  # the nodes exist once it started: asked now
            why = fault_applicability([k for n, k in fault_kinds.items() if n != "cut"], target)
            if why:
                raise UsageError(f"the nemesis cannot act on this target: {why}")
            from conformance.soak.schedule import assign_nodes

            options.schedule = assign_nodes(options.schedule, options.seed, len(target.node_names()))
        url = SecretUrl(target.url)
        adapter = adapter_for(urlsplit(url).scheme, adapter_name, getattr(target, "protocol", None))()
        chosen = None
        if options.mutation:
            from conformance.soak.wire_mutations import choose

            chosen = choose(options.mutation, options.seed, adapter.protocol)
        node_urls = [SecretUrl(u) for u in target.node_urls().values()] if cluster else [url]
        if "cut" in kinds or chosen is not None:
            from conformance.nemesis.proxy_isolated import IsolatedFaultProxy

            proxies = [IsolatedFaultProxy.for_url(u, mutation=chosen.spec if chosen else None).start() for u in node_urls]
            node_urls = [SecretUrl(p.url(u)) for p, u in zip(proxies, node_urls)]
        client_url = node_urls[0]
        conn = adapter.connect(client_url, name="soak probe")
        server = conn.server
        # what the target reports of itself (no-store) selects the profile entries that hold on it only
        profile = profile_on(target, server.product, server.version, adapter.protocol)
        qspec, qtype = queue_spec(profile, options.queue_type)
        refused = refusal([k for k in kinds if k != "cut"], profile, qtype, getattr(target, "name", "the target"),
                          {k: KINDS[k].note(target) for k in kinds if k != "cut"})
        if refused:
            conn.close()
            raise UsageError(refused)
        signal = signal_of(profile, qtype)  # the mark the profile documents on a redelivery: the redelivery checker reads it
        s = conn.session()
        s.declare_queue(qspec)
        conn.close()
        history_path = out / "history.jsonl"
        history = HistoryWriter(history_path)
        soak = Soak(adapter, target, client_url, qspec, options, history, urls=node_urls, kinds=fault_kinds,
                    cut_all=(lambda: [p.cut_all() for p in proxies]) if proxies else None)
        say(f"soak: {server.product} {server.version} ({adapter.protocol}) at {redact(str(url))}, queue {qspec.name} ({qtype}), "
            f"seed {options.seed}, {len(options.schedule)} scheduled fault(s): "
            + (", ".join(f"{e['kind']}@{e['at_s']}s" for e in options.schedule) or "none"))
        ran = soak.run()
        history.close()
        try:
            conn = adapter.connect(client_url, name="soak cleanup")
            conn.session().delete_queue(qspec.name)
            conn.close()
        except ConformanceError:
            pass
    except ConformanceError as exc:
        raise TargetError(scrub(str(exc))) from None
    finally:
        for p in proxies:
            p.close()
        if chosen is not None:
            stats = {"rewritten": sum((p.mutation_stats() or {}).get("rewritten") or 0 for p in proxies)}
        if owned and started:
            target.stop()

    ops = read_history(history_path)
    shape = history_problems(ops)
    if shape:  # the runner's own breakage: never judged as the broker's
        raise TargetError(f"the soak wrote a history that breaks its schema: {'; '.join(shape[:3])}")
    # on a cluster a round trip on a consumer's channel proves its node had an ack, not the queue's
    # leader on another node: acks around a node fault are not judged proven (CheckOptions)
    in_flight = ACK_IN_FLIGHT_S if cluster else 0.0
    check_options = CheckOptions(ordered=options.ordered, requeue_counts=options.requeue_counts, redelivery_signal=signal,
                                 ack_in_flight_s=in_flight)
    results = run_all(ops, check_options)
    documented = annotate(results, ops, profile, qtype)  # anomalies across a fault the profile documents
    counts: dict[str, int] = {}
    for op in ops:
        key = f"{op['f']}:{op['type']}"
        counts[key] = counts.get(key, 0) + 1
    publishes = counts.get("publish:invoke", 0)
    workload_s = ran["workload_s"]
    verdicts = {name: {"verdict": documented[name]["verdict"] if name in documented else r.verdict, "counts": dict(r.counts),
                       "anomalies": r.counts.get("anomalies", len(r.anomalies)), "note": getattr(r, "note", ""),
                       **({"documented": documented[name]} if name in documented else {})} for name, r in results.items()}
    anomalies = [{"checker": name, **_plain(a)} for name, r in results.items() for a in r.anomalies]
    record = {
        "seed": options.seed, "target": getattr(target, "name", "") if spec is None else redact(spec),
        "product": server.product, "version": server.version, "protocol": adapter.protocol,
        **({"seconds": options.seconds} if options.seconds is not None else {"ops": options.ops}),
        "schedule": options.schedule, "options": {**options.record(), "queue": qspec.name, "queue_type": qtype,
                                                   "redelivery_signal": signal, "profile": getattr(profile, "id", ""),
                                                   **({"ack_in_flight_s": in_flight} if in_flight else {})},
        **({"mutation": chosen.record((stats or {}).get("rewritten"))} if chosen is not None else {}),
        "verdicts": verdicts, "anomalies": anomalies,
        "stats": {"ops": len(ops), "publishes": publishes, "deliveries": counts.get("deliver:ok", 0),
                  "workload_s": round(workload_s, 3), "publishes_per_s": round(publishes / workload_s, 1) if workload_s else 0,
                  "ops_per_s": round(len(ops) / workload_s, 1) if workload_s else 0,
                  "by_op": dict(sorted(counts.items())), "faults_fired": soak.fired,
                  # entries whose time came after the workload ended (a long heal can push the rest past it)
                  "faults_not_fired": [e for n, e in enumerate(options.schedule) if n not in {f["entry"] for f in soak.fired}],
                  "drain": ran["drain"], "refused_modes": soak.refused_modes, **({"cluster_whole": ran["whole"]} if ran.get("whole") else {}),
                  "problems": soak.problems},
        "finished_at": time.time(),
    }
    write_json(out / "soak.json", record)
    failed = any(v["verdict"] == "fail" for v in verdicts.values())
    code = EXIT_FAIL if failed else EXIT_USAGE if soak.problems or not ran["drain"].get("complete") else EXIT_OK
    _summary(record, results, out, say)
    if chosen is not None:
        m = record["mutation"]
        caught = verdicts.get(m["expected_checker"], {}).get("verdict") == "fail"
        say(f"MUTATED RUN (self-test, not a verdict on the broker): {m['name']} ({m['operator']}, {m.get('rewritten', 0)} rewrite(s)) "
            + (f"caught by the {m['expected_checker']} checker" if caught else f"NOT caught: the {m['expected_checker']} checker did not fail"))
    return code, record


def is_cluster(target: Any) -> bool:
    """A cluster target (conformance.nemesis.kinds.ClusterOps): its clients spread over its nodes."""
    from conformance.nemesis.kinds import ClusterOps

    return isinstance(target, ClusterOps)


def soak_kinds(names: list[str], cluster: bool) -> dict[str, Any]:
    """The fault kind each schedule kind names: on a cluster ``kill`` is the kill -9 of one node
    (node-kill), the others keep serving; elsewhere the kind of that name."""
    from conformance.nemesis.kinds import KINDS, NODE_KILL

    return {n: NODE_KILL if cluster and n == "kill" else KINDS[n] for n in names}


def _summary(record: dict[str, Any], results: dict[str, Any], out: Path, say: Any) -> None:
    st = record["stats"]
    skipped = ", ".join(f"{e['kind']}@{e['at_s']}s" for e in st["faults_not_fired"])
    say(f"history: {st['ops']} ops in {st['workload_s']:.1f}s ({st['ops_per_s']} ops/s; {st['publishes']} publishes, "
        f"{st['publishes_per_s']}/s; {st['deliveries']} deliveries); faults fired: {len(st['faults_fired'])} of {len(record['schedule'])}"
        + (f" (not fired, the workload had ended: {skipped})" if skipped else "")
        + f"; drain: {st['drain'].get('delivered')} delivered, {'queue empty' if st['drain'].get('complete') else 'NOT empty'}")
    for name, r in results.items():
        figures = ", ".join(f"{k} {v}" for k, v in sorted(r.counts.items()) if k != "anomalies")
        total = r.counts.get("anomalies", len(r.anomalies))
        verdict = record["verdicts"][name]["verdict"]
        say(f"  {verdict.upper():<8} {name}: {total} anomal{'y' if total == 1 else 'ies'}"
            + (f" ({figures})" if figures else "") + (f"; {r.note}" if getattr(r, "note", "") else ""))
        doc = record["verdicts"][name].get("documented")
        for e in (doc or {}).get("entries", ()):
            spans = ", ".join(f"{n} across a {k}" for k, n in sorted(e["across"].items()))
            say(f"      documented ({spans}): {e['as']} {e['requirement']} ({e['observed']}): {e['reason'][:160]} [{e['source'][:160]}]")
        if doc and doc["undocumented"] and doc["entries"]:
            say(f"      undocumented: {doc['undocumented']}")
        for a in r.anomalies[:3]:
            say(f"      {a.kind}: {a.text} [ops {', '.join(str(i) for i in a.ops[:8])}]")
        if total > 3:
            say(f"      ... {total - 3} more (listed in {out}/soak.json)")
    for who, why in st.get("refused_modes", {}).items():
        say(f"  refused: producer {who} published nothing, the target refused its mode ({why})")
    for p in st["problems"]:
        say(f"  problem: {p}")
    say(f"soak: {out}/history.jsonl  {out}/soak.json")
