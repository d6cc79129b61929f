"""Progress on stderr for ``dream run``, ``dream consolidate`` and ``dream eval``: the renderers of
the use cases' progress events (``app/progress.py``), chosen by ``--quiet``, ``--verbose`` and
``--log-format`` (docs/operations.md, "Progress on stderr").

- plain (the default): one line per unit of work as it ends, one per retry;
- json: one JSON object per line, every line of the command's stderr (log lines and the stop
  messages of the signal handler too), for log collectors;
- a live bar (tqdm, imported only then) over the plain lines when stderr is a terminal; never
  with --log-format json or --quiet.

stdout stays the command's result either way.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dream_memory.core.bounded import split_lines
from dream_memory.core.terminal import for_terminal

if TYPE_CHECKING:
    from dream_memory.app.progress import ProgressEvent

F = TypeVar("F", bound=Callable[..., Any])

LOG_FORMATS = ("plain", "json")
# A retry's reason on a plain line: a server's error body can be a page long (--verbose: all of it).
REASON_CHARS = 160


def progress_options(func: F) -> F:
    """``--quiet``, ``--verbose`` and ``--log-format`` (docs/reference/commands.md)."""
    func = click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="plain",
        show_default=True,
        help="stderr as plain lines, or one JSON object per line for log collectors.",
    )(func)
    func = click.option(
        "--verbose", "-v", is_flag=True, help="Also the model phases, tool-call counts and full retry reasons."
    )(func)
    return click.option("--quiet", "-q", is_flag=True, help="No progress on stderr (warnings and errors still show).")(
        func
    )


def _short(text: str, limit: int = REASON_CHARS) -> str:
    first = split_lines(text.strip())[0] if text.strip() else ""
    if len(first) <= limit and first == text.strip():
        return first
    return first[: limit - 1].rstrip() + "…"


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _batch(event: Any, verbose: bool) -> str:
    line = (
        f"dream: batch {event.cursor_from}..{event.cursor_to} ({_entries(event.entries)}"
        + (f", scope {event.scope}" if event.scope else "")
        + f"): {event.outcome}, "
        f"{event.tokens} tokens, {event.seconds:.1f} s"
    )
    if verbose:
        line += f", {event.tool_calls} tool call(s)"
    return line + (f": {event.error}" if event.error else "")


def _retry(event: Any, verbose: bool) -> str:
    reason = event.reason if verbose else _short(event.reason)
    return (
        f"dream: model call attempt {event.attempt} of {event.attempts} failed, "
        f"retrying in {event.wait:.1f} s: {reason}"
    )


def _session(event: Any, verbose: bool) -> str | None:
    if event.outcome == "skipped" and not verbose:  # nothing to do for it: the summary lists it
        return None
    line = (
        f"dream consolidate: {event.path}: {event.outcome}, {event.messages} message(s) -> "
        f"{_entries(event.entries)}, {event.tokens} tokens, {event.seconds:.1f} s"
    )
    why = event.error or (event.reason if event.outcome not in ("consolidated", "would_consolidate") else "")
    return line + (f": {why}" if why else "")


def _step(event: Any, verbose: bool) -> str:
    return (
        f"dream: eval: {event.scenario} {event.date}: consolidate {event.consolidate} "
        f"({event.consolidate_detail}), dream {event.dream} ({event.dream_detail}, {event.commits} commit(s))"
    )


def _scenario(event: Any, verbose: bool) -> str:
    verdict = "PASS" if event.passed else "FAIL"
    return f"dream: eval: {event.scenario}: {verdict}, {event.score}/{event.items} items, {event.seconds:.1f} s"


def _message(event: Any, verbose: bool) -> str:
    return f"dream: {event.text}"


def _started(event: Any, verbose: bool) -> str | None:
    if event.command == "eval":  # today's first line of `dream eval`
        return f"dream: eval: {event.total} scenario(s) with model {event.model}, in {event.where}"
    if not verbose:
        return None
    total = "" if event.total is None else f" over {event.total} {event.unit}(s)"
    return f"dream {event.command}: started{total} with model {event.model}"


def _phase_started(event: Any, verbose: bool) -> str | None:
    return f"dream: phase {event.phase} started" if verbose else None


def _phase_ended(event: Any, verbose: bool) -> str | None:
    if not verbose:
        return None
    return (
        f"dream: phase {event.phase} ended: {event.calls} model call(s), "
        f"{event.tool_calls} tool call(s), {event.seconds:.1f} s"
    )


def _ended(event: Any, verbose: bool) -> str | None:
    if not verbose:
        return None
    return (
        f"dream {event.command}: ended {event.status}, {event.done} done, {event.tokens} tokens, {event.seconds:.1f} s"
    )


_LINES: dict[str, Callable[[Any, bool], str | None]] = {
    "batch_ended": _batch,
    "retry": _retry,
    "session_ended": _session,
    "scenario_step": _step,
    "scenario_ended": _scenario,
    "message": _message,
    "run_started": _started,
    "phase_started": _phase_started,
    "phase_ended": _phase_ended,
    "run_ended": _ended,
}


def plain_line(event: ProgressEvent, *, verbose: bool) -> str | None:
    """The event as one line of text, or None when it has none at this verbosity."""
    return _LINES[event.event](event, verbose)


def json_line(data: dict[str, Any]) -> str:
    """One JSON object on one line, stamped with the time (UTC); ASCII only, so no byte of it is
    a terminal control."""
    stamped = {"ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"), **data}
    return json.dumps(stamped, ensure_ascii=True, separators=(",", ":"), default=str)


def _plural(unit: str) -> str:
    return unit + ("es" if unit.endswith(("ch", "s")) else "s")


_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} {units} [{elapsed}<{remaining}{postfix}]"
_COUNT_FORMAT = "{desc}: {n_fmt} {units} [{elapsed}{postfix}]"


class Renderer:
    """Where a command's progress goes: ``__call__`` takes the use case's events, ``log`` the
    runtime's log lines, ``note`` the human summary, ``signal_line`` the signal handler's text."""

    def __init__(self, *, quiet: bool = False, verbose: bool = False, log_format: str = "plain") -> None:
        self.quiet, self.verbose, self.json = quiet, verbose and not quiet, log_format == "json"
        self._bar: Any = None
        self._bar_wanted = not quiet and not self.json and _stderr_is_terminal()

    # --- events -------------------------------------------------------------------------------

    def __call__(self, event: ProgressEvent) -> None:
        from dream_memory.app import progress as p

        if self.quiet and not (isinstance(event, p.BatchEnded | p.SessionEnded) and event.outcome == "failed"):
            return  # quiet silences progress, never a failure: its line has the error and hint
        if self.json:
            if self.verbose or not isinstance(event, p.PhaseStarted | p.PhaseEnded):
                self._write(json_line(p.to_json(event)))
            return
        # Nothing to do (a total of 0): no bar to flash up and down.
        if isinstance(event, p.RunStarted) and self._bar_wanted and event.total != 0:
            self._open_bar(event)
        line = plain_line(event, verbose=self.verbose)
        if line is not None:
            self._write(for_terminal(line))
        if self._bar is not None and isinstance(event, p.BatchEnded | p.SessionEnded | p.ScenarioEnded):
            self._bar.update(1)
            if isinstance(event, p.BatchEnded):
                self._tokens += event.tokens
                self._bar.set_postfix_str(f"cursor {event.cursor_to}, {self._tokens} tokens", refresh=True)
        if isinstance(event, p.RunEnded):
            self.close()

    def log(self, message: str) -> None:
        """The runtime's log lines (``Runtime.log``): shown even with --quiet (they are warnings
        and errors, not progress)."""
        if self.json:
            self._write(json_line({"event": "message", "text": message}))
        else:
            self._write(for_terminal(f"dream: {message}"))

    def note(self, text: str, *, failed: bool = False) -> None:
        """The command's closing summary: not with --quiet, unless the command ``failed`` (quiet
        silences progress, never an error); one JSON object with --log-format json."""
        if self.quiet and not failed:
            return
        if self.json:
            self._write(json_line({"event": "summary", "text": text}))
        else:
            self._write(for_terminal(text))

    def signal_line(self, text: str) -> str:
        """The signal handler's message as this format writes it (with its newline)."""
        if self.json:
            return json_line({"event": "signal", "text": text}) + "\n"
        return text + "\n"

    # --- output -------------------------------------------------------------------------------

    def _write(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
        else:
            click.echo(line, err=True)

    def _open_bar(self, event: Any) -> None:
        from tqdm import tqdm  # only on a terminal: no import cost for a scheduled job

        self._tokens = 0
        # Follow the terminal's size as it changes; a terminal that reports none (a fresh pty,
        # some CI consoles) would get no bar at all (tqdm draws in 0 rows): then $COLUMNS/$LINES
        # or 80x24.
        try:
            size = os.get_terminal_size(sys.stderr.fileno())
            sized = size.columns > 0 and size.lines > 0
        except (OSError, ValueError):
            sized = False
        fallback = shutil.get_terminal_size()
        self._bar = tqdm(
            total=event.total,
            unit=event.unit,
            # Words, not tqdm's "0batch [00:00, ?batch/s]": "1/3 batches [00:07<00:14, ...]", or
            # "1 batches [00:07, ...]" when the total is not known up front.
            bar_format=(_BAR_FORMAT if event.total is not None else _COUNT_FORMAT).replace(
                "{units}", _plural(event.unit)
            ),
            desc=f"dream {event.command}",
            file=sys.stderr,
            dynamic_ncols=sized,
            ncols=None if sized else fallback.columns,
            nrows=None if sized else fallback.lines,
            leave=False,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # click's test runner: no real descriptor
        return False


def renderer(quiet: bool, verbose: bool, log_format: str) -> Renderer:
    """The command's renderer, closed (its bar taken down) when the command ends."""
    render = Renderer(quiet=quiet, verbose=verbose, log_format=log_format)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(render.close)
    return render
