"""Many brokers in one report, on synthetic cells and run metadata (no Spark, no broker): a column
only where some run has a result in it, and a broker that announces no product named by its target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reports.analysis import scores, undrawn_columns
from reports.render import render_html, render_markdown
from reports.runs import broker_name, read_local


def cell(req: str, verdict: str, *, product: str = "Acme", version: str = "2.0", protocol: str = "amqp-0-9-1", qt: str = "classic",
         reason: str | None = None) -> dict[str, Any]:
    column = " ".join(x for x in (product, version, protocol, qt) if x)
    return {"requirement": req, "level": "MUST", "area": req.split("-")[0].lower(), "product": product, "version": version,
            "protocol": protocol, "queue_type": qt, "column": column, "config": f"{product} {protocol} {qt}", "verdict": verdict,
            "state": verdict, "flaky": False, "spec_verdict": verdict, "vendor_verdict": verdict, "records": 1, "cases": 1, "runs": 1,
            "passes": int(verdict == "pass"), "decided": int(verdict in ("pass", "fail")), "pass_rate": None, "case_id": f"{req}::c",
            "expected": "", "observed": "not run" if verdict == "unsupported" else "", "wire_trace": None, "reason": reason,
            "citation": None, "unsupported_kind": "cannot-express" if verdict == "unsupported" else None}


NO_QUORUM = "profile acme-2 has no queue type 'quorum'"
#: Acme runs its classic queues and has no quorum queue (every quorum case recorded unsupported, as
#: the runner records a queue type the profile lacks); Other has both; Empty has nothing it could run.
CELLS = [cell("ACK-A", "pass"), cell("ACK-B", "fail"), cell("ACK-A", "unsupported", qt="quorum", reason=NO_QUORUM),
         cell("FAILOVER-Q", "unsupported", qt="quorum", reason=NO_QUORUM), cell("ACK-GET", "unsupported", qt="-"),
         cell("ACK-A", "pass", product="Other", version="1"), cell("ACK-A", "unsupported", product="Other", version="1", qt="quorum"),
         cell("ACK-B", "pass", product="Other", version="1", qt="quorum"),
         cell("ACK-A", "unsupported", product="Empty", version="9", qt="classic"), cell("ACK-GET", "unsupported", product="Empty", version="9", qt="-")]


def result(cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cells": cells, "area_scores": scores(cells, "area"), "level_scores": scores(cells, "level"), "flakiness": [], "durations": [],
            "summary": {"records": len(cells), "quarantined": 0, "mutated": 0, "sources": 1, "quarantined_examples": []}}


def test_a_column_is_drawn_only_where_some_run_has_a_result_in_it() -> None:
    undrawn = undrawn_columns(CELLS)
    # Acme's quorum column: every cell unsupported; Other's quorum column has a pass and stays;
    # Acme's any-queue-type cells span its classic column (drawn), so they stay; Empty has no result at all.
    assert sorted(undrawn) == ["Acme 2.0 amqp-0-9-1 quorum", "Empty 9 amqp-0-9-1 -", "Empty 9 amqp-0-9-1 classic"]
    assert undrawn["Acme 2.0 amqp-0-9-1 quorum"] == {"column": "Acme 2.0 amqp-0-9-1 quorum", "cells": 2, "reason": NO_QUORUM}
    assert not undrawn_columns([c for c in CELLS if c["product"] == "Other"])


def test_the_report_draws_no_empty_column_and_says_which_it_left_out() -> None:
    page = render_html(result(CELLS))
    matrix = page.split('id="compliance-matrix"')[1].split("</table>")[0]
    header = matrix.split("</thead>")[0]
    assert header.count(">quorum queue</th>") == 1  # Other's only
    assert ">Acme 2.0 · AMQP 0-9-1</th>" in header and "Empty" not in header
    assert 'title="Acme 2.0 amqp-0-9-1 quorum"' not in matrix and "FAILOVER-Q" not in matrix  # a row only of undrawn cells is no row
    assert '<th colspan="1">Acme 2.0 · AMQP 0-9-1</th><th colspan="2">Other 1 · AMQP 0-9-1</th>' in header
    note = page.split('id="undrawn"')[1].split("</p>")[0]
    assert "Acme 2.0 · AMQP 0-9-1, quorum queue (2 cells: " + NO_QUORUM.replace("'", "&#39;") + ")" in note
    assert "Empty 9 · AMQP 0-9-1, classic queue" in note
    scores_table = page.split('id="areas"')[1].split("</table>")[0]
    assert "quorum queue" in scores_table and "Acme 2.0 · AMQP 0-9-1, quorum queue" not in scores_table and "Empty" not in scores_table
    kpis = page.split("<div>")[1].split("</div>")[0]
    assert "Acme 2.0 · AMQP 0-9-1, classic queue" in kpis and "Acme 2.0 · AMQP 0-9-1, quorum queue" not in kpis
    md = render_markdown(result(CELLS))
    assert "| Acme 2.0 amqp-0-9-1 classic |" in md and "| Acme 2.0 amqp-0-9-1 quorum |" not in md
    assert "_Not drawn (no run has a result in them, every cell unsupported): Acme 2.0 · AMQP 0-9-1, quorum queue (2 cells)" in md


@pytest.mark.parametrize(("announced", "named"), [
    (("RabbitMQ", "3.10.8", "rabbitmq-local"), ("RabbitMQ", "3.10.8")),  # an announced product is kept as it is
    (("unknown", "0", "proton-example"), ("proton-example", None)),  # the Proton example broker: adapter placeholders
    (("unknown", "unknown", "proton-example"), ("proton-example", None)),  # the AMQP 0-9-1 adapter's placeholders
    (("", "", "amqp://guest:***@h:5672/"), ("amqp://guest:***@h:5672/", None)),  # a URL target, redacted as recorded
    ((None, "1.2", "proton-example"), ("proton-example", "1.2")),  # an announced version is kept
    (("Unknown", "0", None), ("Unknown", None)),  # no target to name it by: what was recorded
])
def test_a_broker_that_announces_no_product_is_named_by_its_target(announced: tuple[Any, ...], named: tuple[Any, ...]) -> None:
    assert broker_name(*announced) == named


def test_run_metadata_names_an_unannounced_broker_as_its_records_are(tmp_path: Path) -> None:
    """The gate's profile lines and its cells must name the same broker."""
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "finished", "target": "proton-example", "product": "unknown",
                                                   "version": "0", "protocol": "amqp-1.0"}))
    meta = read_local(str(tmp_path / "results.jsonl"))
    assert (meta.product, meta.version, meta.protocol) == ("proton-example", None, "amqp-1.0")


def test_a_target_without_version_is_titled_without_one() -> None:
    page = render_html(result([cell("ACK-A", "pass", product="proton-example", version=None, protocol="amqp-1.0")]))
    assert ">proton-example · AMQP 1.0</th>" in page and "None" not in page.split('id="compliance-matrix"')[1].split("</table>")[0]
