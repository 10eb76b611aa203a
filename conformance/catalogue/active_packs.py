"""The requirement packs a run has activated: what the requirement and rule loaders add to the core's.

A leaf: :mod:`conformance.catalogue.packs` finds, validates and activates packs (loading the
catalogue to check them), and the loaders in :mod:`~conformance.catalogue.requirements` and
:mod:`~conformance.catalogue.rules` read this registry, so neither loader imports the module that
loads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pack:
    name: str
    requirement_files: tuple[Path, ...]
    rule_files: tuple[Path, ...]
    #: Dotted package name of the pack's cases, and the folder pytest collects.
    cases_package: str
    cases_dir: Path
    protocols: tuple[str, ...] = ()


_ACTIVE: dict[str, Pack] = {}


def active() -> list[Pack]:
    return list(_ACTIVE.values())


def get(name: str) -> Pack | None:
    return _ACTIVE.get(name)


def add(pack: Pack) -> None:
    _ACTIVE[pack.name] = pack


def remove(name: str) -> None:
    _ACTIVE.pop(name, None)


def clear() -> None:
    _ACTIVE.clear()


def pack_of(requirement_file: Path) -> Pack | None:
    for pack in _ACTIVE.values():
        if requirement_file in pack.requirement_files:
            return pack
    return None
