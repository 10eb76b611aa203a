"""Applicability by capability: the AMQP adapters get exactly the requirements their
protocol lists always gave them, a new protocol gets what its capabilities express, and every name
in a requirement, adapter or profile is a known capability."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from adapters.amqp091.pika_adapter import PikaAdapter
from adapters.amqp10.proton_adapter import ProtonAdapter
from conformance.catalogue.capabilities import applicability, check_names, vocabulary
from conformance.catalogue.profiles import parse_profile
from conformance.catalogue.requirements import _parse_area, catalogue
from conformance.errors import UsageError

BASE = {"id": "x", "match": {"product": "X", "protocols": ["p"]}}


@pytest.mark.parametrize("adapter", [PikaAdapter, ProtonAdapter])
def test_amqp_applicability_is_unchanged(adapter: type) -> None:
    """Capabilities reproduce the protocol lists exactly, so no AMQP verdict changes. A requirement
    that lists AMQP 1.0 may need what only a server's admin backend adds (exchanges, a consumer
    count: PUBLISH-UNKNOWN-EXCHANGE-404, ACK-SIXTEEN-CONSUMERS), and applies over 1.0 exactly where
    the backend offers it; the protocol's own capabilities then lack only backend ones."""
    from adapters.amqp10.admin import BACKENDS, COUNTED_CONSUMERS

    backend = frozenset().union(*(b.capabilities for b in BACKENDS.values())) | COUNTED_CONSUMERS \
        if adapter.protocol == "amqp-1.0" else frozenset()
    for r in catalogue().values():
        by_protocol = adapter.protocol in r.protocols
        by_capability = applicability(r, adapter(), SimpleNamespace(id="p", lacks={})) is None
        from_backend = by_protocol and set(r.needs) - adapter.capabilities <= backend
        assert by_protocol == by_capability or from_backend, (adapter.name, r.id, r.needs)


def test_a_new_protocol_gets_what_it_can_express_without_a_catalogue_edit() -> None:
    new = SimpleNamespace(name="inhouse", protocol="inhouse-1", capabilities=frozenset({"ack.individual", "abrupt-disconnect"}))
    applies = {r.id for r in catalogue().values() if applicability(r, new, SimpleNamespace(id="p", lacks={})) is None}
    assert "ACK-ACKED-NEVER-REDELIVERED" in applies and "ACK-REDELIVER-ON-CONNECTION-LOSS" in applies
    assert "ACK-MULTIPLE-UP-TO-TAG" not in applies
    why = applicability(catalogue()["ACK-MULTIPLE-UP-TO-TAG"], new, SimpleNamespace(id="p", lacks={}))
    assert why is not None and "ack.range" in why and "inhouse-1" in why


def test_a_profile_lacking_a_capability_makes_the_requirement_unsupported_with_its_citation() -> None:
    prof = parse_profile({**BASE, "lacks": [{"capability": "get", "reason": "no fetch", "source": "doc#x"}]}, "t")
    why = applicability(catalogue()["ACK-FIRST-NOT-REDELIVERED"], PikaAdapter(), prof)
    assert why is not None and "no fetch" in why and "doc#x" in why


def test_unknown_capability_names_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="unknown capability 'ack.everything'"):
        check_names(["ack.everything"], "adapter 'x'")
    with pytest.raises(UsageError, match="unknown capability"):
        parse_profile({**BASE, "lacks": [{"capability": "nope", "reason": "r", "source": "s"}]}, "t")
    raw = {"area": "ack", "requirements": [{"id": "ACK-X", "level": "EXTENSION", "text": "t", "needs": ["typo"],
                                            "sources": [{"kind": "seed", "ref": "s"}]}]}
    with pytest.raises(UsageError, match="ACK-X.*unknown capability 'typo'"):
        _parse_area(raw, "f.yaml")


def test_every_declared_capability_is_in_the_vocabulary() -> None:
    for adapter in (PikaAdapter, ProtonAdapter):
        assert adapter.capabilities <= vocabulary().keys()
    for r in catalogue().values():
        assert r.needs, f"{r.id} names no capability: it would apply to every protocol"


def test_only_the_selected_adapter_is_loaded_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken plugin that was not selected does not abort the run; the selected one is checked."""
    import conformance.plugins as plugins
    from conformance.api import adapter_for

    class Bad(PikaAdapter):
        name = "bad"
        capabilities = frozenset({"ack.individual", "teleport"})

    class EP:
        def __init__(self, name: str, obj: object) -> None:
            self.name, self._obj = name, obj

        def load(self) -> object:
            if isinstance(self._obj, Exception):
                raise self._obj
            return self._obj

    eps = [EP("pika", PikaAdapter), EP("broken", ImportError("no module named vendor_lib")), EP("bad", Bad)]
    monkeypatch.setattr(plugins, "entry_points", lambda group, name=None: [e for e in eps if name in (None, e.name)])
    import importlib.metadata as md

    monkeypatch.setattr(md, "entry_points", lambda group, name=None: [e for e in eps if name in (None, e.name)])
    assert adapter_for("amqp", "pika") is PikaAdapter
    with pytest.raises(UsageError, match="plugin 'broken' in conformance.adapters failed to load: no module named vendor_lib"):
        adapter_for("amqp", "broken")
    with pytest.raises(UsageError, match="adapter 'bad': unknown capability 'teleport'"):
        adapter_for("amqp", "bad")


def test_new_adapter_writes_a_skeleton_whose_entry_points_and_profile_load(tmp_path: Path) -> None:
    import tomllib

    from conformance.catalogue.profiles import load_profile_file
    from conformance.cli.new_adapter import write_skeleton

    root = write_skeleton("inhouse", tmp_path)
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["conformance.adapters"] == {"inhouse": "conformance_inhouse.adapter:Adapter"}
    prof = load_profile_file(root / "conformance_inhouse/profiles/inhouse-1.yaml")
    assert prof.protocols == ("inhouse",)
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("conformance_inhouse_adapter", root / "conformance_inhouse/adapter.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["conformance_inhouse_adapter"] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    with pytest.raises(UsageError, match="exists already"):
        write_skeleton("inhouse", tmp_path)
    with pytest.raises(Exception, match="not implemented"):
        mod.Adapter().connect("inhouse://x")
    assert (root / "tests/test_adapter_check.py").exists()
