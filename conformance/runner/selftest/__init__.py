"""The suite's self-test: run the catalogue clean and through each protocol mutation, build a kill matrix.

Unit tests of verdicts prove the judging; they do not prove that a scenario provokes and observes
the behaviour. Running the catalogue against a broker made wrong in one known way does: the cases
of the violated requirement must fail (a *kill*). The matrix shows mutations no case caught (blind
spots), cases no mutation failed (unproven checks), cases failing without any mutation (false
alarms), and mutations caught by the wrong requirements (checked against ``expectations.yaml``).

How it runs: one target for the whole self-test. The clean run goes through a probing proxy that
rewrites nothing and records, per case, which operators would have rewritten one of its frames;
each mutation then runs only the cases it can touch (a case whose frames a mutation never rewrites
sees an unchanged broker). Mutation runs go in parallel (cases use their own queues); cases that
restart the broker run apart from them, one run after another, and under a mutation only when the
mutation is declared to break their requirement. Within such a run the runner shares the faults
(conformance.runner.shared_faults): one restart and one kill serve all its cases. Where the target
can be launched twice, those runs go on a second node beside the others (conformance.nemesis.spare_node).

One module per step: ``plan`` (which runs, the second round), ``runs`` (each run in a child
process, the lanes; :func:`conformance.runner.selftest.runs.selftest` is the entry), ``judge`` (the
kill matrix), ``render`` (its files). ``conformance selftest`` (conformance.cli.selftest) is only
its command line.
"""
