"""What breaks things on purpose: the fault kinds (``kinds.py``: what each needs of a target, how it
is fired and healed), frame faults and the fault proxy, the framing base, node operations of a
cluster, and the mutation engine with what each mutation must break (``expectations.yaml``)."""
