"""The exit codes every command shares: 0 every MUST held; 1 a MUST failed; 2 usage or
infrastructure error (bad input, unreachable target, a case that could not reach a verdict)."""

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
