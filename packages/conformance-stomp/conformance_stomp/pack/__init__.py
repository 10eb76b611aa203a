"""The STOMP 1.2 requirement pack (entry-point group ``conformance.packs``, see conformance/catalogue/packs.py):
normative statements of the STOMP 1.2 specification itself, quoted in ``rules/``, and cases that
write and read STOMP frames on a socket of their own, because what they check (a RECEIPT's
receipt-id, ERROR then close) lies below the neutral API every adapter offers."""

from pathlib import Path

_HERE = Path(__file__).parent
REQUIREMENTS = str(_HERE / "requirements")
RULES = str(_HERE / "rules")
CASES = "conformance_stomp.pack.cases"
#: The cases speak STOMP 1.2 frames themselves: the requirements apply to STOMP adapters only.
PROTOCOLS = ("stomp-1.2",)
