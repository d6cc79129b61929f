"""What a failed chat-completions call was, in our terms: (kind, retryable, HTTP status), and the
wait a server asked for. Third-party exceptions are read from the chain by class *name*, so the
same checks work on exceptions from litellm, the openai client or httpx without importing any of
them; our own HTTP route's error answer is ``EndpointAnswered``, defined here."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping

# A Retry-After longer than this is not waited for: a batch job should fail the run (transiently,
# without counting against the batch) rather than sit idle for an hour.
MAX_RETRY_AFTER_SECONDS = 60.0


class EndpointAnswered(Exception):
    """The endpoint answered with an HTTP error status. ``str()`` is the server's own message."""

    def __init__(self, status_code: int, headers: Mapping[str, str], message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = dict(headers)


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and all(exc is not s for s in seen):
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _has(chain: list[BaseException], *names: str) -> bool:
    """Whether any exception in ``chain`` is (a subclass of) a class named ``module.Name``.

    Matching by name keeps openai and httpx out of this module's imports, and lets the checks
    run on exceptions from whichever of the three libraries raised them.
    """
    wanted = set(names)
    return any(f"{cls.__module__.split('.')[0]}.{cls.__name__}" in wanted for exc in chain for cls in type(exc).__mro__)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def classify(exc: BaseException) -> tuple[str, bool, int | None]:
    """(kind, retryable, HTTP status) for an exception raised by a litellm completion call."""
    chain = _chain(exc)
    if _has(chain, "litellm.BudgetExceededError"):
        return "budget", False, None
    # litellm's own classes blur the lines (its Timeout is also raised for an HTTP 504, and every
    # timeout class is a connection error to openai), so first ask whether a server answered.
    answered = (
        getattr(exc, "litellm_response_headers", None) is not None
        or _has(chain[1:], "openai.APIStatusError", "httpx.HTTPStatusError")
        or isinstance(exc, EndpointAnswered)
    )
    if not answered:
        if _has(chain, "openai.APITimeoutError", "httpx.TimeoutException", "builtins.TimeoutError"):
            return "timeout", True, None
        if _has(chain, "openai.APIConnectionError", "httpx.TransportError", "builtins.ConnectionError"):
            return "connection", True, None
    status = _status(exc)
    if status is None:
        return "bad_request", False, None
    if status == 500 and not answered:
        # litellm reports an unreadable 200 answer (not JSON, no choices) as a made-up 500 with
        # no HTTP error underneath; asking a server that answers nonsense again only burns budget.
        return "bad_reply", False, None
    if status in (401, 402, 403):
        return "auth", False, status
    if status == 429:
        return "rate_limit", True, status
    if status == 408:
        return "timeout", True, status
    if status >= 500 or status == 409:
        return "server", True, status
    return "bad_request", False, status


def retry_after(exc: BaseException | None) -> float | None:
    """The server's requested wait in seconds, when it gave one within reason."""
    if exc is None:
        return None
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    except AttributeError:
        return None
    seconds: float | None = None
    if "retry-after-ms" in lowered:
        try:
            seconds = float(lowered["retry-after-ms"]) / 1000
        except ValueError:
            seconds = None
    if seconds is None and "retry-after" in lowered:
        raw = lowered["retry-after"].strip()
        try:
            seconds = float(raw)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                return None
            seconds = when.timestamp() - time.time()
    if seconds is None or not math.isfinite(seconds) or not 0 <= seconds <= MAX_RETRY_AFTER_SECONDS:
        return None
    return seconds
