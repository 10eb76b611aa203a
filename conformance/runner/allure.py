"""Allure output: labels, verdicts and attachments of each case, and a results writer that scrubs.

Allure's own file logger writes whatever a test result holds (exception messages, tracebacks,
parameters, attachments). :func:`install_scrubbing_writer` puts a writer in its place whose every
byte passes through :func:`conformance.secrets.scrub`, so no credential reaches allure-results.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

from conformance.catalogue.requirements import Requirement
from conformance.kit.history import History
from conformance.secrets import scrub

SEVERITY = {"MUST": "critical", "SHOULD": "normal", "MAY": "minor", "EXTENSION": "trivial"}


def labels(req: Requirement, queue_type: str | None, variant: str | None, target: str, protocol: str, profile: str) -> None:
    try:
        import allure
    except ImportError:  # allure-pytest is optional at run time
        return
    allure.dynamic.epic(req.area)
    allure.dynamic.feature(req.id)
    allure.dynamic.story(f"{queue_type or 'default'} queue" + (f", {variant}" if variant else ""))
    allure.dynamic.label("area", req.area)
    allure.dynamic.label("requirement", req.id)
    allure.dynamic.label("level", req.level)
    allure.dynamic.severity(SEVERITY[req.level])
    allure.dynamic.tag(req.level, protocol, f"queue:{queue_type or 'default'}")
    allure.dynamic.parameter("profile", profile)
    # Two targets (or protocols) running the same case must be two results, not retries of one.
    allure.dynamic.parameter("target", target)
    allure.dynamic.parent_suite(target)
    allure.dynamic.suite(req.area)
    allure.dynamic.sub_suite(req.id)
    allure.dynamic.description(req.text)
    for s in req.sources:
        if s.url:
            allure.dynamic.link(s.url, name=f"{s.kind}: {s.ref}"[:120])


def verdict_label(verdict: str) -> None:
    """The conformance verdict as a label: Allure's own status cannot say deviation or unsupported."""
    try:
        import allure
    except ImportError:
        return
    allure.dynamic.label("verdict", verdict)
    allure.dynamic.tag(f"verdict:{verdict}")


def environment(folder: str | None, meta: dict[str, Any]) -> None:
    """environment.properties: what Allure shows as the run's environment (never the password)."""
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    keys = ("target", "target_url", "product", "version", "protocol", "adapter", "profile", "suite_version", "mutation")
    lines = [f"{k}={str(meta[k]).replace(chr(10), ' ')}" for k in keys if meta.get(k)]
    (Path(folder) / "environment.properties").write_text(scrub("\n".join(lines) + "\n"))


def attach(text: str, history: History | None, trace: str = "") -> None:
    try:
        import allure
    except ImportError:
        return
    allure.attach(scrub(text), name="expected vs observed", attachment_type=allure.attachment_type.TEXT)
    if history is not None and history.events:
        allure.attach(scrub(history.render()), name="history", attachment_type=allure.attachment_type.TEXT)
    if trace:
        allure.attach(scrub(trace), name="wire trace", attachment_type=allure.attachment_type.TEXT)


def install_scrubbing_writer() -> None:
    """Make allure-pytest's file logger write every result and container through the redaction point.

    The logger stays registered (allure-pytest unregisters it by identity at the end); only the
    class of the instance changes, so its ``report_result`` now serialises through :func:`scrub`.
    Attachments need no hook here: the suite's own pass through :func:`attach`, and the captured
    output allure-pytest attaches comes from the test report, which the plugin scrubs first."""
    try:
        import allure_commons
        from allure_commons.logger import AllureFileLogger
        from attr import asdict
    except ImportError:
        return

    class ScrubbingFileLogger(AllureFileLogger):  # type: ignore[misc]
        def _report_item(self, item: Any) -> None:
            data = asdict(item, filter=lambda _, v: v or v is False)
            name = item.file_pattern.format(prefix=uuid.uuid4())
            tmp, final = self._report_dir / f"{name}.tmp", self._report_dir / name
            with io.open(tmp, "w", encoding="utf8") as fh:
                fh.write(scrub(json.dumps(data, ensure_ascii=False)))
            os.replace(tmp, final)

    for plugin in allure_commons.plugin_manager.get_plugins():
        if type(plugin) is AllureFileLogger:
            plugin.__class__ = ScrubbingFileLogger
