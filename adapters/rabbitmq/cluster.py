"""A private three-node RabbitMQ cluster on loopback (target ``rabbitmq-cluster``), for the failover cases.

Each node is a :class:`~adapters.rabbitmq.launcher.RabbitMQLocalNode` (own node name, AMQP and
distribution ports, data dir, supervisor watchdog), and the nodes share what a cluster must share:
one Erlang cookie and one private epmd port. They cluster through classic-config peer discovery,
all three booting in parallel: the first node has no peer discovery (it forms the cluster), the others
list only the first and retry joining it until it answers (classic config has no lock in 3.10, so
nodes listing each other could form separate clusters; a node that has joined once rejoins from its
own data on every later start). Ready when the
first node reports all three running (``rabbitmqctl await_online_nodes``).

Each node has a loopback address of its own (127.X.Y.2, .3, .4, with X.Y random per cluster so that
two clusters on one machine never share one): its AMQP listener, its Erlang distribution listener
and its outgoing node-to-node connections (``inet_dist_connect_options``) are bound to it, and the
node names are long names on those addresses (``conformance-<tag>-1@127.X.Y.2``). That is what a
partition needs: :meth:`partition` drops packets between node addresses with an nftables table of
the suite's own (conformance.nemesis.netfilter), while clients and the CLI tools, which connect
from 127.0.0.1, still reach every node. ``net_ticktime`` is lowered to :data:`NET_TICKTIME_S` so
that a partition is noticed within a soak, and ``cluster_partition_handling`` is
:data:`PARTITION_HANDLING` (see docs/failover.md for why).

Per-node faults for cases: :meth:`kill_node` (kill -9 of the node's process group),
:meth:`stop_node` (SIGTERM), :meth:`start_node`; :meth:`partition` / :meth:`heal_partition` and
:meth:`await_whole`; :meth:`node_urls` gives every node's AMQP URL for clients that fail over. Vendor-only operations a case may need (where a quorum queue's leader is,
a mirroring policy) go through ``rabbitmqctl``, each call costing 1-2 s on a busy machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapters.rabbitmq.launcher import RabbitMQLocalNode, amqp_ready, free_port
from conformance.errors import TargetError
from conformance.targets import Target, wait_until

NODES = 3
#: Erlang's net_ticktime on every node and CLI call (default 60 s): a peer silent this long (give or
#: take a quarter) is down, so a partition is noticed within 8-13 s.
NET_TICKTIME_S = 10
#: RabbitMQ's partition handling mode: the minority side pauses and comes back by itself once it
#: sees a majority again, so a healed partition leaves a whole cluster without an operator.
PARTITION_HANDLING = "pause_minority"
#: Bound on one rabbitmqctl call (a node CLI boots an Erlang VM: 1-2 s idle, more when busy).
CTL_TIMEOUT_S = 60.0
STATE = "cluster.json"


class ClusterNode(RabbitMQLocalNode):
    """A node of the cluster: the cluster's cookie and epmd port, and the peers to join at first boot."""

    def __init__(self, name: str = "rabbitmq-cluster-node", *, node: str = "", cookie: str = "", epmd_port: int = 0,
                 peers: list[str] | None = None, password: str = "", address: str = "127.0.0.1",
                 cluster_addresses: list[str] | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.node = node or self.node
        self.host = address
        #: Every node's address: the one epmd the nodes share listens on all of them.
        self.cluster_addresses = cluster_addresses or [address]
        # users live in the cluster's schema database: a joining node's own default user is never
        # created, so every node's URL carries the first node's credentials
        self.password = password or self.password
        self.cluster_cookie = cookie or secrets.token_hex(16)
        self.epmd_port = epmd_port
        self.peers = peers or []
        self._own_dir = True  # its watchdog removes the node's directory (the cluster's parent dir is the cluster's)

    def _cookie(self) -> str:
        return self.cluster_cookie

    def _dist_env(self) -> dict[str, str]:
        ip = "{" + self.host.replace(".", ",") + "}"
        tick = f"-kernel net_ticktime {NET_TICKTIME_S}"
        return {"RABBITMQ_USE_LONGNAME": "true",
                # listen on the node's own address and connect to peers from it (what a partition cuts)
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": f"-kernel inet_dist_use_interface {ip} "
                                                       f"-kernel inet_dist_connect_options [{{ip,{ip}}}] {tick}",
                # the CLI tools tick as often as the nodes, or a node drops a quiet CLI connection
                "RABBITMQ_CTL_ERL_ARGS": tick,
                "ERL_EPMD_ADDRESS": ",".join(["127.0.0.1", *[a for a in self.cluster_addresses if a != "127.0.0.1"]])}

    def _extra_config(self) -> list[str]:
        lines = [f"cluster_partition_handling = {PARTITION_HANDLING}"]
        if not self.peers:  # the first node: no discovery (it would wait out its retries for peers)
            return lines
        lines += ["cluster_formation.peer_discovery_backend = classic_config",
                 # no random wait before discovery (3.10 default 5-60 s): the order of boots is ours
                 "cluster_formation.randomized_startup_delay_range.min = 0",
                 "cluster_formation.randomized_startup_delay_range.max = 1",
                 # a joining node boots beside the first one and retries joining it until it answers
                 "cluster_formation.discovery_retry_limit = 240",
                 "cluster_formation.discovery_retry_interval = 500"]
        lines += [f"cluster_formation.classic_config.nodes.{i} = {p}" for i, p in enumerate(self.peers, 1)]
        return lines

    def ctl(self, *args: str, timeout: float = CTL_TIMEOUT_S) -> str:
        """``rabbitmqctl -n <this node> args...``; TargetError with the tool's own words on failure."""
        cmd = [str(self.home / "bin" / "rabbitmqctl"), "-n", self.node, *args]
        try:
            out = subprocess.run(cmd, env=self._env(), cwd=self.dir, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise TargetError(f"rabbitmqctl {' '.join(args)} on {self.node}: no answer within {timeout:.0f}s") from None
        if out.returncode != 0:
            said = " ".join((out.stderr or out.stdout).split())[:300]
            raise TargetError(f"rabbitmqctl {' '.join(args)} on {self.node} failed ({out.returncode}): {said}")
        return out.stdout


class RabbitMQCluster(Target):
    """Three private clustered nodes; ``url`` is the first node's (the run's ordinary connections)."""

    def __init__(self, name: str = "rabbitmq-cluster", *, size: int = NODES, home: str | None = None,
                 cluster_dir: str | None = None, boot_timeout: float = 120.0, **_: object) -> None:
        super().__init__(name=name)
        self.size = size
        self.home = home
        self.boot_timeout = boot_timeout
        self._own_dir = cluster_dir is None
        self.dir = Path(cluster_dir) if cluster_dir else None
        self.nodes: list[ClusterNode] = []
        self._attached = False
        self._partitioner: Any = None
        #: Seconds the last :meth:`start` took (cluster formed and every node answering AMQP).
        self.start_s: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def can_restart(self) -> bool:
        return True

    def _build(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="conformance-rmq-cluster-"))
        self.dir.chmod(0o700)
        tag = secrets.token_hex(3)
        addresses = node_addresses(self.size)
        names = [f"conformance-{tag}-{i}@{a}" for i, a in enumerate(addresses, 1)]
        cookie, epmd, password = secrets.token_hex(16), free_port(), secrets.token_urlsafe(12)
        for i, n in enumerate(names):
            peers = [names[0]] if i else []  # the first boots alone; the others join it
            self.nodes.append(ClusterNode(f"{self.name}/{i + 1}", node=n, cookie=cookie, epmd_port=epmd, peers=peers,
                                          password=password, address=addresses[i], cluster_addresses=addresses,
                                          home=self.home, node_dir=str(self.dir / f"n{i + 1}"), boot_timeout=self.boot_timeout))

    def start(self) -> None:
        if self.nodes and all(n.check_running() for n in self.nodes):
            return
        began = time.monotonic()
        if not self.nodes:
            self._build()
        try:
            with ThreadPoolExecutor(max_workers=self.size) as pool:
                list(pool.map(lambda n: n.start(), self.nodes))
            self.nodes[0].ctl("await_online_nodes", str(self.size), "--timeout", str(int(self.boot_timeout)))
            # A fresh single node enables every feature flag; a cluster formed by peer discovery under
            # load was once left with quorum_queue disabled (every quorum declare then fails 541).
            # Enabling all of them once the nodes are in is what a fresh node would have done.
            self.nodes[0].ctl("enable_feature_flag", "all")
        except BaseException:
            self.stop()
            raise
        self.start_s = round(time.monotonic() - began, 1)
        self.url = self.nodes[0].url
        self._save()
        self.facts = {"launcher": "rabbitmq-cluster", "nodes": ",".join(n.node for n in self.nodes),
                      "cluster_dir": str(self.dir), "start_s": str(self.start_s)}

    def _save(self) -> None:
        assert self.dir is not None
        (self.dir / STATE).write_text(json.dumps({"nodes": [str(n.dir) for n in self.nodes]}))

    def handle(self) -> dict[str, str]:
        assert self.dir is not None
        return {"launcher": "rabbitmq-cluster", "node_dir": str(self.dir)}

    @classmethod
    def attached(cls, cluster_dir: str, **options: object) -> RabbitMQCluster:
        """Control a cluster another process launched: node faults work; stop() leaves it running."""
        c = cls(cluster_dir=cluster_dir, **options)  # type: ignore[arg-type]
        c._attached = True
        dirs = json.loads((Path(cluster_dir) / STATE).read_text())["nodes"]
        c.nodes = [ClusterNode.attached(d) for d in dirs]  # type: ignore[misc]
        for n in c.nodes:
            n.cluster_addresses = [m.host for m in c.nodes]
        c.size = len(c.nodes)
        c.url = c.nodes[0].url
        c.facts = {"launcher": "rabbitmq-cluster", "nodes": ",".join(n.node for n in c.nodes), "cluster_dir": cluster_dir}
        return c

    def stop(self) -> None:
        """Every node's watchdog stops its node and removes its directory; then the cluster's own."""
        if self._attached:
            self._heal_quietly()
            return
        self._heal_quietly()
        errors = []
        for n in self.nodes:
            try:
                n.stop()
            except TargetError as exc:
                errors.append(str(exc))
        if self._own_dir and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self.nodes = []
        if errors:
            raise TargetError("; ".join(errors))

    def kill(self) -> None:
        """Whole-cluster kill -9 (the single-node faults of other areas)."""
        for n in self.nodes:
            n.kill()

    def restart(self) -> None:
        for n in self.nodes:
            n.shutdown()
        self.start_all()

    def start_all(self) -> None:
        """Start every stopped node (in parallel: a restarted node waits for its peers' tables)."""
        down = [n for n in self.nodes if not n.check_running()]
        with ThreadPoolExecutor(max_workers=max(1, len(down))) as pool:
            list(pool.map(lambda n: n.start(), down))

    def check_alive(self) -> str | None:
        return self.nodes[0].check_alive() if self.nodes else "cluster not started"

    # -- the cluster operations cases use (conformance.nemesis.cluster.ClusterOps) ------------------------

    def node_names(self) -> list[str]:
        return [n.node for n in self.nodes]

    def node_urls(self) -> dict[str, str]:
        return {n.node: n.url for n in self.nodes}

    def _node(self, name: str) -> ClusterNode:
        for n in self.nodes:
            if n.node == name:
                return n
        raise TargetError(f"no node {name!r} in {self.name}")

    def kill_node(self, name: str) -> None:
        self._node(name).kill()

    def stop_node(self, name: str) -> None:
        self._node(name).shutdown()

    def start_node(self, name: str) -> None:
        self._node(name).start()

    def restart_node(self, name: str) -> None:
        """Graceful stop (SIGTERM) and start of one node; it rejoins the cluster from its own data."""
        self._node(name).restart()

    def node_running(self, name: str) -> bool:
        n = self._node(name)
        return n.check_running() and amqp_ready(n.amqp_port, n.host)

    # -- partitions (conformance.nemesis.kinds.PartitionOps) --------------------------------------

    def partition_unusable(self) -> str | None:
        """Why this machine cannot cut the nodes apart (no nft tool, no permission), or None."""
        from conformance.nemesis import netfilter

        return netfilter.unusable()

    def partition(self, a: list[str], b: list[str]) -> None:
        """Cut every link between a node of ``a`` and a node of ``b`` (both directions); every node
        stays up and reachable by clients."""
        from conformance.nemesis.netfilter import Partitioner

        if self._partitioner is None:
            self._partitioner = Partitioner()
        self._partitioner.partition((self._node(x).host, self._node(y).host) for x in a for y in b if x != y)

    def heal_partition(self) -> str:
        """Every link back (the rules deleted); :meth:`await_whole` waits for the cluster to see it.
        Returns what the nodes reported just before the heal (the partition's evidence: which nodes
        each side saw running; a paused minority node answers no cluster_status), "" when none was cut."""
        if self._partitioner is None or not self._partitioner.cut:
            return ""
        # one node of each side: the most cut one (a paused minority answers no cluster_status) and a peer
        cuts = Counter(x for pair in self._partitioner.cut for x in pair)
        names = self.node_names()
        most = max(names, key=lambda n: cuts[self._node(n).host])
        ask = [most, next(n for n in names if n != most)]
        seen = []
        for n in ask:
            try:
                running = self.cluster_view(n)["running"]
                seen.append(f"{_short(n)} saw running {','.join(_short(r) for r in running)}")
            except (TargetError, ValueError) as exc:
                paused = "requires the 'rabbit' app to be running" in str(exc)
                seen.append(f"{_short(n)} " + (f"paused (rabbit app stopped: {PARTITION_HANDLING})" if paused
                                               else ' '.join(str(exc).split(': ', 1)[-1].split())[:90]))
        self._partitioner.heal()
        return "before the heal " + "; ".join(seen)

    def _heal_quietly(self) -> None:
        if self._partitioner is not None:
            self._partitioner.close()
            self._partitioner = None

    def cluster_view(self, name: str) -> dict[str, Any]:
        """What one node says of the cluster: ``running`` nodes and ``partitions`` (rabbitmqctl
        cluster_status); TargetError when it does not answer."""
        out = self._node(name).ctl("cluster_status", "--formatter", "json", timeout=30)
        data = json.loads(out)
        parts = data.get("partitions") or {}
        return {"running": sorted(data.get("running_nodes") or []), "partitions": parts}

    def await_whole(self, timeout: float = 120.0, queue: str | None = None) -> str:
        """Until every node runs, answers AMQP and sees all the others running with no partition
        (each node asked in turn), and ``queue`` (a quorum queue) has a leader with every member
        online. Returns what was seen; TargetError with the last view when the bound passed."""
        end = time.monotonic() + timeout
        began = time.monotonic()
        names = self.node_names()
        last = "not asked"
        while True:
            try:
                down = [n for n in names if not self.node_running(n)]
                if down:
                    last = f"not running: {', '.join(down)}"
                else:
                    views = {n: self.cluster_view(n) for n in names}
                    bad = {n: v for n, v in views.items() if v["running"] != sorted(names) or v["partitions"]}
                    if bad:
                        last = "; ".join(f"{n} sees running {v['running']} partitions {v['partitions']}" for n, v in bad.items())
                    elif queue is not None:
                        info = self.queue_replicas(queue)
                        if info.get("leader") and sorted(info.get("online") or []) == sorted(info.get("members") or []):
                            return (f"{len(names)} nodes running, no partition; {queue} leader {info['leader']}, "
                                    f"{len(info['online'])} members online after {time.monotonic() - began:.1f}s")
                        last = f"{queue}: leader {info.get('leader')}, online {info.get('online')} of {info.get('members')}"
                    else:
                        return f"{len(names)} nodes running, no partition after {time.monotonic() - began:.1f}s"
            except (TargetError, ValueError) as exc:
                last = str(exc)
            if time.monotonic() >= end:
                raise TargetError(f"{self.name} not whole within {timeout:.0f}s: {last}")
            time.sleep(0.5)  # allowed: polling the broker's own report with a deadline

    def _ctl_node(self) -> ClusterNode:
        up = [n for n in self.nodes if n.check_running()]
        if not up:
            raise TargetError(f"{self.name}: no node is running")
        return up[0]

    def queue_replicas(self, queue: str) -> dict[str, Any]:
        """Where a queue lives, from a running node: quorum ``leader``/``members``/``online``, classic
        ``home`` (its pid's node) and ``mirrors``/``synchronised`` (mirrored classic queues). Table
        output: the JSON formatter prints pids without the node they run on."""
        cols = ["name", "type", "leader", "members", "online", "pid", "slave_pids", "synchronised_slave_pids"]
        out = self._ctl_node().ctl("list_queues", *cols, "--quiet", "--no-table-headers")
        for line in out.splitlines():
            row = dict(zip(cols, line.split("\t")))
            if row.get("name") == queue:
                return {"type": row.get("type"), "leader": row.get("leader") or None, "members": _list(row.get("members")),
                        "online": _list(row.get("online")), "home": _pid_node(row.get("pid")),
                        "mirrors": [_pid_node(p) for p in _list(row.get("slave_pids"))],
                        "synchronised": [_pid_node(p) for p in _list(row.get("synchronised_slave_pids"))]}
        raise TargetError(f"queue {queue!r} not listed by {self._ctl_node().node}")

    def set_policy(self, name: str, pattern: str, definition: dict[str, Any], apply_to: str = "queues") -> None:
        self._ctl_node().ctl("set_policy", name, pattern, json.dumps(definition), "--apply-to", apply_to)

    def clear_policy(self, name: str) -> None:
        self._ctl_node().ctl("clear_policy", name)

    def rss_mb(self) -> dict[str, float]:
        """Resident memory of each node's beam process (MB), for the closing note of a run."""
        out: dict[str, float] = {}
        for n in self.nodes:
            pid = n._pid()
            total = 0
            for child in _descendants(pid) if pid else []:
                try:
                    status = Path(f"/proc/{child}/status").read_text()
                    comm = Path(f"/proc/{child}/comm").read_text().strip()
                except OSError:
                    continue
                if comm.startswith("beam"):
                    total += int(next((ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")), "0"))
            out[n.node] = round(total / 1024, 1)
        return out


def _short(node: str) -> str:
    """'conformance-1a2b3c-2@127.9.9.3' -> 'n2' (the node's place in the cluster), for one-line reports."""
    return "n" + node.split("@")[0].rsplit("-", 1)[-1]


def _list(v: str | None) -> list[str]:
    """'[a@h, b@h]' -> ['a@h', 'b@h'] (the CLI's table rendering of a list; '' and '[]' are empty)."""
    text = (v or "").strip().strip("[]").strip()
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def _pid_node(pid: Any) -> str | None:
    """'<rabbit@host.1.2.3>' -> 'rabbit@host' (the CLI prints a pid with its node's name)."""
    if not pid:
        return None
    text = str(pid).strip("<>")
    return text.rsplit(".", 3)[0] if text.count(".") >= 3 else text


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def node_addresses(size: int) -> list[str]:
    """``size`` loopback addresses 127.X.Y.2, .3, ... with X.Y random: a cluster's own, so that a
    partition of one cluster never cuts another's nodes (the whole of 127/8 is loopback on Linux)."""
    x, y = secrets.randbelow(254) + 1, secrets.randbelow(254) + 1
    return [f"127.{x}.{y}.{i}" for i in range(2, size + 2)]


def launch(arg: str | None = None, **options: object) -> Target:
    """Entry point for ``--target rabbitmq-cluster``; ``attach=<cluster_dir>`` (or the target
    ``rabbitmq-cluster:<cluster_dir>``) controls a running cluster another process launched."""
    attach = options.pop("attach", None) or arg
    if attach:
        return RabbitMQCluster.attached(str(attach), **options)
    return RabbitMQCluster(**options)  # type: ignore[arg-type]


def wait_node_up(cluster: RabbitMQCluster, name: str, timeout: float) -> bool:
    return wait_until(lambda: cluster.node_running(name), timeout, 0.1)
