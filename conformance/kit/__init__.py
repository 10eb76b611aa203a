"""What a case imports: ``Case`` and its context (``case.py``, ``context/``), shared scenario steps,
the checkers and verdicts that judge observations, the operation history, the reference clients
(``clients/``). See docs/architecture.md."""
