"""The evaluation's report: one item per (check, subject), the runs, each scenario's score and the
score table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dream_memory.app.evaluation.scenarios import CHECKS, Scenario
from dream_memory.core.stop import signal_name


@dataclass
class Item:
    check: str
    subject: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "subject": self.subject, "passed": self.passed, "detail": self.detail}


@dataclass
class Run:
    date: str
    step: str  # consolidate | dream
    status: str
    detail: str = ""
    tokens: int = 0
    commits: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "date": self.date,
            "step": self.step,
            "status": self.status,
            "detail": self.detail,
            "tokens": self.tokens,
            "commits": self.commits,
            "errors": self.errors,
        }


@dataclass
class ScenarioResult:
    scenario: Scenario
    items: list[Item] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    baseline: list[Item] = field(default_factory=list)  # what a model that stores nothing scores
    workspace: Path | None = None
    duration_s: float = 0.0
    interrupted: bool = False  # a stop came before its days were done: not checked, not scored

    def counts(self, check: str) -> tuple[int, int]:
        mine = [i for i in self.items if i.check == check]
        return sum(1 for i in mine if i.passed), len(mine)

    @property
    def passed_items(self) -> int:
        return sum(1 for i in self.items if i.passed)

    @property
    def score(self) -> float:
        return self.passed_items / len(self.items) if self.items else 0.0

    @property
    def baseline_passed(self) -> int:
        return sum(1 for i in self.baseline if i.passed)

    @property
    def failed_required(self) -> list[str]:
        return [c for c in self.scenario.required if (n := self.counts(c))[0] != n[1]]

    @property
    def passed(self) -> bool:
        # Compared on integers so that a threshold of exactly p/q is met by p/q passed items.
        needed = self.scenario.threshold * len(self.items) - 1e-9
        return bool(self.items) and self.passed_items >= needed and not self.failed_required

    def to_json(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "name": s.name,
            "title": s.title,
            "threshold": s.threshold,
            "required": list(s.required),
            "passed": self.passed,
            "score": {"passed": self.passed_items, "total": len(self.items), "share": round(self.score, 4)},
            "baseline": _score(self.baseline_passed, len(self.baseline)),
            "above_baseline": self.passed_items - self.baseline_passed,
            "checks": [
                {"check": c, "title": t, "passed": self.counts(c)[0], "total": self.counts(c)[1]} for c, t in CHECKS
            ],
            "failed_required": self.failed_required,
            "items": [i.to_json() for i in self.items],
            "runs": [r.to_json() for r in self.runs],
            "tokens": sum(r.tokens for r in self.runs),
            "workspace": str(self.workspace) if self.workspace is not None else None,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass
class EvalReport:
    model: str
    results: list[ScenarioResult]
    duration_s: float = 0.0
    stopped_by: int | None = None  # the signal that stopped it (status interrupted, exit 128 + it)
    interrupted: str | None = None  # the scenario in flight then (not checked, not scored)
    not_run: list[str] = field(default_factory=list)  # the scenarios after it

    @property
    def passed(self) -> bool:
        return self.stopped_by is None and all(r.passed for r in self.results)

    @property
    def status(self) -> str:
        if self.stopped_by is not None:
            return "interrupted"
        return "ok" if self.passed else "failed"

    @property
    def exit_code(self) -> int:
        from dream_memory.app.outcome import exit_code

        return exit_code(self)

    def to_json(self) -> dict[str, Any]:
        passed = sum(r.passed_items for r in self.results)
        total = sum(len(r.items) for r in self.results)
        baseline = sum(r.baseline_passed for r in self.results)
        return {
            "status": self.status,
            "model": self.model,
            "passed": self.passed,
            "score": {"passed": passed, "total": total, "share": round(passed / total, 4) if total else 0.0},
            "baseline": _score(baseline, total),
            "scenarios": [r.to_json() for r in self.results],
            "tokens": sum(r.to_json()["tokens"] for r in self.results),
            "stopped_by": self.stopped_by,
            "interrupted": self.interrupted,
            "not_run": self.not_run,
            "duration_s": round(self.duration_s, 3),
        }

    def table(self, *, details: bool = True) -> str:
        """The score table: one column per scenario, one row per check (deterministic text)."""
        names = [r.scenario.name for r in self.results]
        width = max(len(t) for _, t in CHECKS)
        cols = [max(len(n), 7) for n in names]
        head = f"{'check':<{width}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, cols, strict=True))
        lines = [f"dream eval: model {self.model}, {len(self.results)} scenario(s)", "", head, "-" * len(head)]
        for check, title in CHECKS:
            cells = []
            for result, w in zip(self.results, cols, strict=True):
                got, total = result.counts(check)
                mark = "" if got == total else "!"
                cells.append(f"{mark}{got}/{total}".rjust(w) if total else "-".rjust(w))
            lines.append(f"{title:<{width}}  " + "  ".join(cells))
        lines.append("-" * len(head))
        score_cells = [f"{r.passed_items}/{len(r.items)}".rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'score':<{width}}  " + "  ".join(score_cells))
        base = [f"{r.baseline_passed}/{len(r.items)}".rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'do-nothing baseline':<{width}}  " + "  ".join(base))
        need = [f"{r.scenario.threshold:.0%}".rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'threshold':<{width}}  " + "  ".join(need))
        verdict = [("PASS" if r.passed else "FAIL").rjust(w) for r, w in zip(self.results, cols, strict=True)]
        lines.append(f"{'result':<{width}}  " + "  ".join(verdict))
        if details:
            failures = [(r.scenario.name, i) for r in self.results for i in r.items if not i.passed]
            if failures:
                lines += ["", "failed items:"]
                lines += [f"  {name}: {i.check}: {i.subject}: {i.detail}" for name, i in failures]
            for r in self.results:
                if r.failed_required:
                    lines.append(f"  {r.scenario.name}: required check(s) not met: {', '.join(r.failed_required)}")
        if self.stopped_by is not None:
            left = [n for n in [self.interrupted, *self.not_run] if n]
            stopped = f"stopped by {signal_name(self.stopped_by)}"
            lines += ["", f"{stopped}: not run or not finished: {', '.join(left) or '-'}"]
        lines += ["", f"overall: {'PASS' if self.passed else ('INTERRUPTED' if self.stopped_by else 'FAIL')}"]
        return "\n".join(lines)


def _score(passed: int, total: int) -> dict[str, Any]:
    return {"passed": passed, "total": total, "share": round(passed / total, 4) if total else 0.0}
