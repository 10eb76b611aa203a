"""The profile key schema: every key the sources read is documented, every bundled profile validates,
and a typo in a key or value is refused in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from conformance.catalogue.profile_keys import profile_keys
from conformance.catalogue.profiles import bundled_profiles, parse_profile
from conformance.catalogue.requirements import catalogue
from conformance.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
#: A dotted, lower-case profile key as a string literal (plain or the fixed head of an f-string).
#: A line that reads a profile entry: the call itself, or the key variable a verdict passes to it.
READS = re.compile(r"\.entry\(|\bkey = |\bjudge\(|_KEYS = |\bENTRY = ")
KEY_LITERAL = re.compile(r'(f?)"([a-z0-9-]+\.[a-z0-9.-]+?)(\{[^"]*)?"')


def keys_read_by_sources() -> tuple[set[str], set[str]]:
    """Literal keys and f-string prefixes in every source file that reads profile entries."""
    literal, prefixes = set(), set()
    for path in [*(ROOT / "conformance").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")]:
        text = path.read_text()
        if ".entry(" not in text and "signal_of(" not in text and "judge(" not in text:
            continue
        reading = [line for line in text.splitlines() if READS.search(line)]
        for is_f, head, rest in KEY_LITERAL.findall("\n".join(reading)):
            (prefixes if is_f and rest else literal).add(head)
    return literal, prefixes


def test_every_key_the_sources_read_is_in_the_schema() -> None:
    keys = profile_keys()
    literal, prefixes = keys_read_by_sources()
    assert "delivery-limit.support" in literal and "requeue.position." in prefixes, "the scan must see the known reads"
    undocumented = sorted(k for k in literal if k not in keys)
    assert not undocumented, f"keys read in the sources but missing from conformance/catalogue/data/profile_keys.yaml: {undocumented}"
    for prefix in prefixes:
        assert any(k.startswith(prefix) for k in keys), f"f-string key {prefix}... matches no documented key"
    unread = [k for k in keys if k not in literal and not any(k.startswith(p) for p in prefixes)]
    assert not unread, f"documented keys no source reads: {unread}"


def test_schema_names_real_requirements() -> None:
    ids = set(catalogue())
    for spec in profile_keys().values():
        assert spec.read_by, f"{spec.name}: read_by is empty"
        missing = [r for r in spec.read_by if r not in ids]
        assert not missing, f"{spec.name}: read_by names unknown requirements {missing}"



def test_every_reference_a_requirement_states_is_of_a_key_that_names_it() -> None:
    """The loader checks profile entries against the references of the requirements a key's read_by
    names: a reference stated by a requirement the key does not name would go unchecked."""
    keys = profile_keys()
    unnamed = sorted(f"{r.id}: {ref.key}" for r in catalogue().values() for ref in r.reference if r.id not in keys[ref.key].read_by)
    assert not unnamed, f"references of keys whose read_by does not name the requirement: {unnamed}"

def test_every_bundled_profile_validates() -> None:
    profiles = bundled_profiles()  # parse_profile checks every entry against the schema
    assert len(profiles) >= 12


BASE = {"id": "x", "match": {"product": "X", "protocols": ["amqp-0-9-1"]}}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"entries": {"requeue.postion.nack": {"value": "publication-order", "source": "s"}}}, "unknown key 'requeue.postion.nack'"),
        ({"entries": {"requeue.position.nack": {"value": "publication_order", "source": "s"}}}, "unknown value 'publication_order'"),
        ({"entries": {"delivery-limit.counted-returns": {"value": ["nack", "requeue"], "source": "s"}}}, "unknown item(s) ['requeue']"),
        ({"entries": {"delivery-limit.default": {"value": -1, "source": "s"}}}, "non-negative integer"),
        ({"entries": {"delivery-count.first": {"value": {"get": "zero"}, "source": "s"}}}, "exactly the keys get, consume"),
        ({"entries": {"prefetch.global": {"value": "per-channel", "source": "s",
                                          "by_queue_type": {"quorum": {"value": "refused540", "source": "s"}}}}}, "by_queue_type.quorum: unknown value"),
        ({"entires": {}}, "unknown field(s) entires"),
    ],
)
def test_a_typo_is_refused_in_one_line(extra: dict, message: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_profile({**BASE, **extra}, "p.yaml")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_valid_values_of_every_kind_load() -> None:
    data = {**BASE, "entries": {
        "delivery-limit.default": {"value": 20, "source": "s"},
        "delivery-count.first": {"value": {"get": "zero", "consume": "absent"}, "source": "s"},
        "delivery-limit.counted-returns": {"value": ["nack", "reject"], "source": "s"},
    }}
    p = parse_profile(yaml.safe_load(yaml.safe_dump(data)), "p.yaml")
    assert p.entry("delivery-limit.default").value == 20


def test_cli_lists_every_profile_key() -> None:
    from tests.e2e.test_e2e_rabbitmq import run_cli

    proc = run_cli("list", "--profile-keys", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for spec in profile_keys().values():
        assert f"{spec.name}  [{spec.kind}, judged by {spec.judged}]" in proc.stdout
        assert all(value in proc.stdout for value in spec.values)
