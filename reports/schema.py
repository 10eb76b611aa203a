"""The versioned result schema the pipeline reads (documented in reports/SCHEMA.md).

A run writes ``run.json`` (``conformance.run/1``) and ``results.jsonl``: one ``conformance.result/1``
record per decided case, appended as it is decided. The pipeline reads the records with this
explicit Spark schema instead of inferring one: inference costs a full extra pass over a million
lines, and a field that happens to be null in every sample would come out with the wrong type.
"""

from __future__ import annotations

from typing import Any

RESULT_SCHEMAS = ("conformance.result/1",)
RUN_SCHEMAS = ("conformance.run/1",)

#: Verdicts, worst first: a matrix cell over several cases or repetitions shows the worst.
VERDICTS = ("fail", "error", "blocked", "deviation", "undocumented", "unsupported", "pass")  # blocked: a preflight assumption the target broke
LEVELS = ("MUST", "SHOULD", "MAY", "EXTENSION")

#: (field, Spark type, meaning). Objects (observations, history) are kept as their JSON text.
RESULT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("schema", "string", "record schema id, conformance.result/1"),
    ("run_id", "string", "the run that decided the case"),
    ("case_id", "string", "the case (file::class::test[queue type-variant])"),
    ("requirement", "string", "requirement id (conformance/catalogue/data/requirements/*.yaml)"),
    ("level", "string", "MUST, SHOULD, MAY or EXTENSION"),
    ("area", "string", "catalogue area (ack, tx, link, ...)"),
    ("queue_type", "string", "queue type the case ran on (classic, quorum) or null"),
    ("variant", "string", "the case's extra parameter, or null"),
    ("verdict", "string", "pass, fail, deviation, unsupported, undocumented, error or blocked (a preflight assumption the target broke)"),
    ("spec_verdict", "string", "the verdict against the specification alone"),
    ("vendor_verdict", "string", "the verdict against the broker's documented behaviour (profile)"),
    ("reason", "string", ("why a deviation/unsupported/undocumented (the profile entry); for a fail the profile names as a "
                          "known bug, \"known broker bug, open upstream: \" and the entry's reason")),
    ("citation", "string", "the source of that reason"),
    ("known_bug", "string", ("for a `fail` whose observation matches a profile's `known_bugs` entry (a bug reported upstream "
                             "and still open), that entry's source, the upstream report; the verdict stays `fail`; null otherwise")),
    ("unsupported_kind", "string", ("for an `unsupported` verdict, which of its three meanings: `cannot-express` (the adapter or protocol "
                                    "cannot express the requirement), `refused` (the broker refused an optional feature cleanly, in the "
                                    "protocol's own way; the refusal is in `observed`) or `no-fault` (the target cannot take the fault "
                                    "the case needs); null otherwise")),
    ("expected", "string", "what the requirement demands, in protocol terms"),
    ("observed", "string", "what the broker did, in protocol terms"),
    ("duration_s", "double", ("time the case took, without its wait for the broker lock or for a restart under way "
                              "(that is `lock_wait_s`, kept in the files)")),
    ("attempt", "long", "repetition number of the case within its run"),
    ("finished_at", "double", "unix time the case was decided"),
    ("target", "string", "target name (redacted URL or launcher name)"),
    ("product", "string", "server product announced at connect time"),
    ("version", "string", "server version"),
    ("protocol", "string", "amqp-0-9-1 or amqp-1.0"),
    ("adapter", "string", "adapter plugin"),
    ("profile", "string", "profile id the verdicts were judged with"),
    ("suite_version", "string", "version of this suite"),
    ("mutation", "string", "set only by the self-test: the run was made faulty on purpose (never a result about the broker)"),
    ("wire_trace", "string", "decoded frames both ways (failing cases, or --keep-history)"),
    ("history", "string", "operation history (JSON text)"),
)

REQUIRED = ("requirement", "level", "area", "verdict")


def spark_schema() -> Any:
    """The StructType for results.jsonl, plus the column Spark fills with a line it cannot parse."""
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "double": T.DoubleType(), "long": T.LongType()}
    fields = [T.StructField(name, kinds[kind], True) for name, kind, _ in RESULT_FIELDS]
    return T.StructType(fields + [T.StructField("_corrupt", T.StringType(), True)])
