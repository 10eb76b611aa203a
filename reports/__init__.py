"""Compliance reports built from run results (the PySpark pipeline lands here; see README)."""
