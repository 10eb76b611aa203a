"""Soak runs: a concurrent workload against a target under a nemesis, its history, and the checkers."""
