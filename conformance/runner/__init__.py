"""A run, without pytest in it: the option table, the run's lifecycle and state, one case under its
deadline (``case_runner.py``), the one builder of a result record (``records.py``), results,
preflight, liveness, shared faults, the pytest command line of a run
(``pytest_argv.py``), the self-test's engine (``selftest/``). The pytest shell is conformance.pytest_plugin."""
