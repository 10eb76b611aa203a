"""Compliance reports built from run results (the PySpark pipeline; see docs/reports.md)."""
