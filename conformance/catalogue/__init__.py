"""What is required, and of whom: requirements and spec rules as data (``data/``), capabilities,
requirement packs, the profile model and loader, coverage and compliance. No case, runner or
pytest code; see docs/architecture.md."""
