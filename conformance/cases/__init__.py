"""The case catalogue: one sub-package per area, one module per spec section, one class per case."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

CASES_DIR = Path(__file__).parent


def areas() -> list[str]:
    return sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def all_cases() -> list[type]:
    """Every concrete Case subclass in the catalogue, in module order."""
    from conformance.kit.case import Case

    found: list[type] = []
    for area in areas():
        pkg = f"{__name__}.{area}"
        for mod in pkgutil.iter_modules([str(CASES_DIR / area)]):
            if not mod.name.startswith("test_"):
                continue
            module = importlib.import_module(f"{pkg}.{mod.name}")
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, Case) and obj is not Case and obj.__module__ == module.__name__:
                    found.append(obj)
    from conformance.catalogue.packs import active

    for pack in active():  # the cases of every loaded requirement pack
        for mod in pkgutil.walk_packages([str(pack.cases_dir)], prefix=f"{pack.cases_package}."):
            if not mod.name.rpartition(".")[2].startswith("test_"):
                continue
            module = importlib.import_module(mod.name)
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, Case) and obj is not Case and obj.__module__ == module.__name__:
                    found.append(obj)
    return found
