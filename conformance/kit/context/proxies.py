"""A case's fault proxies: one in front of the target, proof that a fault fired, their wire traces."""

from __future__ import annotations

from conformance.kit.context.connections import Connections
from conformance.kit.context.state import ScenarioVoid
from conformance.nemesis.faults import Fault
from conformance.nemesis.proxy import ProxyBase
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy


class Proxies(Connections):
    """Client-side faults (between the client and the broker), each proxy's wire trace in the report."""

    # -- faults --------------------------------------------------------------------------------

    def proxy(self) -> ProxyBase:
        """A fault proxy in front of the target; its wire trace joins the case's report.

        Its relay runs in a process of its own so that neither the client's speed nor a fault's
        timing depends on who holds this process's GIL."""
        p = IsolatedFaultProxy.for_url(self.url, on_event=lambda text: self.history.add("proxy", "event", text))
        p.protocol = self.adapter.protocol
        p.start()
        self.proxies.append(p)
        self.history.add("suite", "proxy", f"127.0.0.1:{p.port} -> {p.upstream[0]}:{p.upstream[1]}")
        return p

    def expect_fired(self, fault: Fault, frame: str | None = None) -> str:
        """The fault fired on the intended frame, or the scenario is void (an error, never a verdict).

        A fault acting after its frame was forwarded may still be finishing when the client has
        already seen the frame, hence the bounded wait on its condition."""
        if not fault.wait(5.0) or fault.hit is None:
            raise ScenarioVoid(f"fault did not fire: {fault.describe()}")
        want = frame or fault.frame
        if want != "*" and f" {want} on channel" not in fault.hit:
            raise ScenarioVoid(f"fault hit {fault.hit}, not a {want} frame")
        return fault.hit

    def wire_trace(self) -> str:
        parts = []
        for i, p in enumerate(self.proxies, 1):
            text = p.trace.render()
            if text:
                parts.append(f"-- proxy {i} (127.0.0.1:{p.port} -> {p.upstream[0]}:{p.upstream[1]}) --\n{text}")
        return "\n".join(parts)
