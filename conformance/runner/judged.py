"""What a score is out of: the verdicts that judged the broker, and those that did not.

pass, fail and deviation measured the broker against a requirement. error (the suite or the
infrastructure broke) and blocked (a preflight assumption did not hold) judged nothing: counting
them as judged once showed "0% (0/24 judged requirements pass)" for a broker the suite could not
judge at all. They are shown apart, as are unsupported and undocumented (never judged either).
"""

from __future__ import annotations

from typing import Any, Mapping

JUDGED = ("pass", "fail", "deviation")
#: Decided but not a judgement of the broker: counted and shown apart from every score.
NOT_JUDGED = ("error", "blocked")


def summary(counts: Mapping[str, int]) -> dict[str, Any]:
    """Counts per verdict -> the headline: judged (pass/fail/deviation), its pass score (None when
    nothing was judged), and error and blocked apart."""
    judged = sum(int(counts.get(v, 0)) for v in JUDGED)
    passed = int(counts.get("pass", 0))
    return {"judged": judged, **{v: int(counts.get(v, 0)) for v in (*JUDGED, *NOT_JUDGED)},
            "score": round(passed / judged, 4) if judged else None}


def headline(counts: Mapping[str, int], unit: str = "cases") -> str:
    """One line: ``75% (3/4 judged cases pass; 1 fail, 0 deviation); not judged: 2 error, 0 blocked``."""
    s = summary(counts)
    score = f"{100 * s['score']:.0f}%" if s["score"] is not None else "n/a"
    return (f"{score} ({s['pass']}/{s['judged']} judged {unit} pass; {s['fail']} fail, {s['deviation']} deviation); "
            f"not judged: {s['error']} error, {s['blocked']} blocked")
