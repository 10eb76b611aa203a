"""Soak histories: the operation log a soak run writes (``history``), the checkers that judge it
(``checkers``: pure functions of the history), a healthy model broker's history (``synthetic``) and
the history mutations the checkers must find (``mutations``); the run itself (``conformance soak``):
the workload and nemesis (``runner``), the schedule (``schedule``) and the whole run (``execute``).

The schema is the soak runner's and the checkers' shared contract: docs/soak-checkers.md.
"""
