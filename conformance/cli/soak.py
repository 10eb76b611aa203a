"""``conformance soak``: concurrent producers and consumers against a target under a seeded nemesis,
the history in OUT/history.jsonl, the checkers' verdicts in OUT/soak.json (docs/soak.md).

Exit codes: 0 every checker passed; 1 a checker failed; 2 usage or infrastructure (bad option, the
target could not start, a fault could not heal, the drain did not empty the queue)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from conformance.cli.exit_codes import EXIT_USAGE
from conformance.errors import TargetError, UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("soak", help="concurrent producers and consumers under a seeded nemesis; history and checkers")
    p.add_argument("--target", default=None, help="launcher name (rabbitmq-local, process:lavinmq), or an amqp:// URL")
    p.add_argument("--adapter", default=None, help="the client adapter (default: the one the URL scheme picks)")
    bound = p.add_mutually_exclusive_group()
    bound.add_argument("--seconds", type=float, default=None, help="run the workload this long (default 10 without --ops)")
    bound.add_argument("--ops", type=int, default=None, help="run the workload until this many publishes were invoked")
    p.add_argument("--seed", type=int, default=1, help="seeds the schedule and every client's choices (default 1)")
    p.add_argument("--producers", type=int, default=3, help="producers (default 3: one of each mode)")
    p.add_argument("--consumers", type=int, default=2, help="consumers (default 2)")
    p.add_argument("--modes", default="confirm,tx,plain", help="producer modes assigned round-robin (confirm, tx, plain)")
    p.add_argument("--prefetch", type=int, default=10)
    p.add_argument("--nack-rate", type=float, default=0.05, help="share of deliveries nacked with requeue (seeded)")
    p.add_argument("--cancel-rate", type=float, default=0.01, help="chance per delivery that the consumer cancels and consumes again")
    p.add_argument("--rollback-rate", type=float, default=0.1, help="share of tx-mode transactions rolled back instead of committed")
    p.add_argument("--queue-type", default=None, help="queue type from the profile (default quorum where offered, else classic)")
    p.add_argument("--nemesis", default="", help="fault kinds for the seeded schedule: cut,kill,restart,pause,partition (partition: cluster targets)")
    p.add_argument("--fault-every", type=float, default=4.0, help="mean seconds between seeded faults (default 4)")
    p.add_argument("--horizon", type=float, default=10.0, help="with --ops: the seconds over which the seeded schedule spreads faults")
    p.add_argument("--schedule", type=Path, default=None, help="a scripted schedule: YAML list of {at_s, kind} (instead of --nemesis)")
    p.add_argument("--ordered", action="store_true", help="tell the checkers the broker promises per-producer order here")
    p.add_argument("--requeue-counts", action="store_true", help="tell the checkers delivery counts must grow on every redelivery")
    p.add_argument("--mutation", default=None, metavar="NAME[:N]",
                   help="self-test aid: the fault proxy makes the broker wrong on purpose (confirmed-lost, duplicate-after-failover, "
                        "tx-publish-dropped; docs/soak.md); the verdicts are then about the mutation, not the broker")
    p.add_argument("--shrink", action="store_true",
                   help="when a checker fails, re-run smaller soaks (fewer faults, fewer ops) and print the command replaying the smallest that still fails")
    p.add_argument("--shrink-runs", type=int, default=None, help="with --shrink: at most this many re-runs (default 10)")
    p.add_argument("--shrink-seconds", type=float, default=None, help="with --shrink: at most this many seconds of re-runs (default 300)")
    p.add_argument("--out", type=Path, default=None, help="results folder (default runs/soak-<time>)")
    p.set_defaults(func=command)


def options_from(args: argparse.Namespace) -> Any:
    from conformance.soak.runner import MODES, SoakOptions
    from conformance.soak.schedule import generate_schedule, load_schedule

    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UsageError(f"--modes {args.modes}: each of {', '.join(MODES)}")
    for name in ("producers", "consumers", "prefetch"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    for name in ("nack_rate", "cancel_rate", "rollback_rate"):
        if not 0 <= getattr(args, name) <= 1:
            raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1")
    if args.ops is not None and args.ops < 1:
        raise UsageError("--ops must be at least 1")
    seconds = args.seconds if args.seconds is not None or args.ops is not None else 10.0
    if seconds is not None and seconds <= 0:
        raise UsageError("--seconds must be positive")
    kinds = tuple(k.strip() for k in args.nemesis.split(",") if k.strip())
    if args.schedule and kinds:
        raise UsageError("give --nemesis (a seeded schedule) or --schedule (a scripted one), not both")
    horizon = seconds if seconds is not None else args.horizon
    schedule = load_schedule(args.schedule) if args.schedule else generate_schedule(args.seed, kinds, horizon, args.fault_every)
    if kinds and not schedule:
        raise UsageError(f"--nemesis {args.nemesis}: a soak of {horizon:g}s leaves no room for a fault (none in the first and last second)")
    mutation = getattr(args, "mutation", None)
    if mutation:
        from conformance.soak.wire_mutations import check_options

        check_options(mutation, modes, {e["kind"] for e in schedule})
    return SoakOptions(seed=args.seed, seconds=seconds, ops=args.ops, producers=args.producers, consumers=args.consumers,
                       modes=modes, prefetch=args.prefetch, nack_rate=args.nack_rate, cancel_rate=args.cancel_rate,
                       rollback_rate=args.rollback_rate,
                       queue_type=args.queue_type, nemesis=kinds, schedule=schedule, horizon_s=horizon,
                       ordered=args.ordered, requeue_counts=args.requeue_counts, mutation=mutation or None)


def command(args: argparse.Namespace) -> int:
    from conformance.soak.execute import execute

    options = options_from(args)
    out = args.out or Path("runs") / time.strftime("soak-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        if args.shrink:
            from conformance.soak.shrink import MAX_RUNS, MAX_SECONDS, run_and_shrink

            runs = args.shrink_runs if args.shrink_runs is not None else MAX_RUNS
            seconds = args.shrink_seconds if args.shrink_seconds is not None else MAX_SECONDS
            if runs < 1 or seconds <= 0:
                raise UsageError("--shrink-runs must be at least 1 and --shrink-seconds positive")
            code, _ = run_and_shrink(args.target, options, out, adapter_name=args.adapter, max_runs=runs, max_seconds=seconds,
                                     say=lambda text: print(text, flush=True))
            return code
        code, _ = execute(args.target, options, out, adapter_name=args.adapter, say=lambda text: print(text, flush=True))
    except TargetError as exc:
        print(f"conformance soak: {exc}")
        return EXIT_USAGE
    return code
