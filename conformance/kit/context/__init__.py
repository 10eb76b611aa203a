"""The parts of a case's context (``conformance.kit.case.CaseContext``), one module each: state,
connections, proxies, queues and messages, waits and barriers, broker faults, cleanup."""
