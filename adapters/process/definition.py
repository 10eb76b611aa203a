"""A process target's definition: the small YAML file that says how to run one broker binary.

Why a file and not code: a broker a user built or installed by hand (LavinMQ from a tarball, a
RabbitMQ from a package) needs only its command line, its ports and how to tell it is ready, and
the restart and kill -9 cases then run against it with no Python written. Every string may carry
placeholders, filled when the target is prepared:

    {binary}      the resolved broker binary          {run_dir}   the target's private directory
    {binary_dir}  the directory holding the binary    {token}     a random hex id for this target
    {data_dir}    {run_dir}/data, kept across restart {user} {password}  the credentials of `url`
    {port[NAME]}  a free loopback port per name       {env[NAME]} the suite's environment variable NAME ("" if unset)

A literal brace is written twice (``{{`` ``}}``), as in Python's str.format.
"""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from conformance import yamlio
from conformance.errors import TargetError, UsageError

#: Top-level keys of a definition; anything else is a typo and refused.
FIELDS = ("name", "binary", "ports", "start", "env", "env_clear_prefixes", "files", "links", "credentials", "url", "ready",
          "stop", "no_store", "fixed_paths")
BINARY_FIELDS = ("command", "env", "search", "install")
READY_PROTOCOLS = ("amqp-0-9-1", "amqp-1.0")
#: A relative definition path is also looked up from here, so it works outside a checkout's cwd.
REPO_ROOT = Path(__file__).resolve().parents[2]
ADAPTERS_DIR = REPO_ROOT / "adapters"


@dataclass(frozen=True)
class Binary:
    """Where the broker binary comes from: an env var naming a path, else the search dirs, else PATH.

    A relative search dir is read from the suite's checkout (``../shared/brokers/...`` finds the
    builds a development machine keeps beside it) and then from the working directory."""

    command: str
    env: str | None
    search: tuple[str, ...]
    install: str

    def resolve(self, target: str) -> str:
        """The binary's absolute path, or a one-line error that says what to install or set."""
        if self.env and os.environ.get(self.env):
            path = os.environ[self.env]
            if os.path.isfile(path):
                # resolved as the search dirs are: the broker starts in its run directory, where a
                # relative path names nothing, and {binary_dir} is the install's, not a symlink's
                return str(Path(path).resolve())
            raise TargetError(f"target {target}: ${self.env}={path} is not a file; point it at the {self.command} binary")
        # The definition's own search dirs first: they name the right binary where PATH has a wrapper
        # (Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user; /usr/lib/rabbitmq/bin does not).
        found = next((str(p.resolve()) for p in self.candidates() if p.is_file()), None) or shutil.which(self.command)
        if found:
            return found
        how = f"set ${self.env} to its path, or " if self.env else ""
        raise TargetError(f"target {target}: broker binary {self.command!r} not found on PATH"
                          f"{' or in ' + ', '.join(self.search) if self.search else ''}; {how}install it ({self.install})")

    def candidates(self) -> list[Path]:
        out: list[Path] = []
        for d in self.search:
            bases = [Path(d)] if Path(d).is_absolute() else [REPO_ROOT / d, Path.cwd() / d]
            out.extend(base / self.command for base in bases)
        return out


@dataclass(frozen=True)
class Definition:
    """A parsed, validated process target definition."""

    name: str
    path: str
    binary: Binary
    ports: tuple[str, ...]
    start: tuple[str, ...]
    env: dict[str, str]
    env_clear_prefixes: tuple[str, ...]
    files: dict[str, str]
    #: Symbolic links made in the run directory (path inside it -> what it points at), e.g. a private
    #: library directory for a build whose own links were flattened when it was copied.
    links: dict[str, str]
    user: str
    password: str | None  # None: a random one per target
    url: str
    ready_protocol: str
    ready_port: str
    ready_timeout_s: float
    stop_signal: int
    stop_timeout_s: float
    #: Why this broker keeps nothing across a restart (no store module, in memory only), or None when
    #: its data directory holds its durable state. Restart and kill cases are then ``unsupported
    #: (no-fault)`` in these words: the target cannot take a restart on its own data.
    no_store: str | None = None
    #: Paths that, when one exists (placeholders filled), mean the broker has a store after all (a
    #: store module installed beside it): :attr:`no_store` then does not hold.
    store_if_present: tuple[str, ...] = ()
    #: Paths the broker binds that no option moves (path -> why), so it cannot be private there:
    #: the target holds a machine-wide lock on each while it lives (another target of the suite
    #: waits for it) and refuses to start while a server it did not start answers there.
    fixed_paths: dict[str, str] = field(default_factory=dict)


def _str_map(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: expected a mapping of names to strings")
    return {str(k): str(v) for k, v in raw.items()}


def parse_definition(data: Any, origin: str) -> Definition:
    """Validate a definition; every problem is one line naming the file and the key."""
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: a process target definition must be a mapping")
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise UsageError(f"{origin}: unknown key(s) {', '.join(map(str, unknown))}; allowed: {', '.join(FIELDS)}")
    for key in ("name", "binary", "ports", "start", "url", "ready"):
        if not data.get(key):
            raise UsageError(f"{origin}: missing {key!r}")
    b = data["binary"]
    if isinstance(b, str):
        b = {"command": b}
    if not isinstance(b, dict) or not b.get("command") or any(k not in BINARY_FIELDS for k in b):
        raise UsageError(f"{origin}: binary: expected a command name or a mapping of {', '.join(BINARY_FIELDS)}")
    ports = data["ports"]
    if not isinstance(ports, list) or not all(isinstance(p, str) and p.isidentifier() for p in ports):
        raise UsageError(f"{origin}: ports: expected a list of port names (identifiers)")
    start = data["start"]
    if not isinstance(start, list) or not all(isinstance(a, (str, int)) for a in start):
        raise UsageError(f"{origin}: start: expected a list of arguments (the command line, {{binary}} first)")
    ready = data["ready"]
    if not isinstance(ready, dict) or ready.get("protocol") not in READY_PROTOCOLS or ready.get("port") not in ports:
        raise UsageError(f"{origin}: ready: expected protocol ({' or '.join(READY_PROTOCOLS)}) and port (one of {ports})")
    stop = data.get("stop") or {}
    sig_name = str(stop.get("signal", "SIGTERM"))
    try:
        sig = signal.Signals[sig_name].value
    except KeyError:
        raise UsageError(f"{origin}: stop.signal: unknown signal {sig_name!r}") from None
    creds = data.get("credentials") or {}
    if not isinstance(creds, dict) or any(k not in ("user", "password") for k in creds):
        raise UsageError(f"{origin}: credentials: expected user and password (password 'random' for a fresh one)")
    password = creds.get("password", "random")
    files = _str_map(data.get("files"), f"{origin}: files")
    links = _str_map(data.get("links"), f"{origin}: links")
    for key, names in (("files", files), ("links", links)):
        for rel in names:
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise UsageError(f"{origin}: {key}: {rel!r} must be a path inside the run directory")
    no_store, store_if_present = data.get("no_store"), ()
    if isinstance(no_store, dict):
        unknown = [k for k in no_store if k not in ("why", "unless_present")]
        present = no_store.get("unless_present") or []
        if unknown or not isinstance(present, list):
            raise UsageError(f"{origin}: no_store: expected why and unless_present (a list of paths)")
        no_store, store_if_present = no_store.get("why"), tuple(str(x) for x in present)
    if no_store is not None and not (isinstance(no_store, str) and no_store.strip()):
        raise UsageError(f"{origin}: no_store: expected one line saying why the broker keeps nothing across a restart")
    fixed_paths = _str_map(data.get("fixed_paths"), f"{origin}: fixed_paths")
    for path in fixed_paths:
        if not Path(path).is_absolute():
            raise UsageError(f"{origin}: fixed_paths: {path!r} must be an absolute path (one the broker binds whatever its options)")
    return Definition(
        name=str(data["name"]),
        path=origin,
        binary=Binary(command=str(b["command"]), env=b.get("env"), search=tuple(b.get("search") or ()),
                      install=str(b.get("install", f"put {b['command']} on PATH"))),
        ports=tuple(ports),
        start=tuple(str(a) for a in start),
        env=_str_map(data.get("env"), f"{origin}: env"),
        env_clear_prefixes=tuple(data.get("env_clear_prefixes") or ()),
        files=files,
        links=links,
        user=str(creds.get("user", "guest")),
        password=None if password == "random" else str(password),
        url=str(data["url"]),
        ready_protocol=str(ready["protocol"]),
        ready_port=str(ready["port"]),
        ready_timeout_s=float(ready.get("timeout_s", 60)),
        stop_signal=sig,
        stop_timeout_s=float(stop.get("timeout_s", 30)),
        no_store=" ".join(no_store.split()) if no_store else None,
        store_if_present=store_if_present,
        fixed_paths=fixed_paths,
    )


def bundled_definitions() -> dict[str, Path]:
    """The definitions shipped with each broker product (``adapters/<product>/targets/<name>.yaml``),
    by name: ``process:lavinmq`` and the older spelling ``process:targets/lavinmq.yaml`` both find one."""
    return {p.stem: p for p in sorted(ADAPTERS_DIR.glob("*/targets/*.yaml"))}


def find_definition(spec: str) -> Path:
    """The file ``process:<spec>`` names: as given, else relative to the suite's checkout, else a
    bundled definition of that name."""
    for candidate in (Path(spec), REPO_ROOT / spec):
        if candidate.is_file():
            return candidate
    name = Path(spec).name.removesuffix(".yaml") if spec.startswith("targets/") or "/" not in spec else None
    bundled = bundled_definitions()
    if name in bundled:
        return bundled[name]
    raise UsageError(f"process target definition {spec!r} not found (give a YAML file or one of: {', '.join(bundled)})")


def load_definition(spec: str) -> Definition:
    path = find_definition(spec)
    try:
        data = yamlio.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: cannot read process target definition: {' '.join(str(exc).split())}") from None
    return parse_definition(data, str(path))


def render(template: str, values: dict[str, Any], origin: str) -> str:
    """Fill the placeholders of one string; an unknown placeholder is a one-line usage error."""
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise UsageError(f"{origin}: bad placeholder in {template!r}: {exc} (known: {', '.join(sorted(values))}, port[NAME])") from None
