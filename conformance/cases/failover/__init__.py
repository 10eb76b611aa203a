"""Failover across cluster nodes (issue 21): cases that kill one node of a cluster target."""
