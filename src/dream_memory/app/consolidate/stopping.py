"""Stopping a consolidation from outside (a signal): the model calls check the run's stop flag,
and a call still in flight past the stop wait is abandoned (``core.stop.StopNow``). Either way
the slice in flight has not landed yet (its entries are appended only after every call of it),
so it is left whole for the next run."""

from __future__ import annotations

from collections.abc import Sequence

from dream_memory.app.dream.budget import Interrupted
from dream_memory.core.chat import ChatReply, Message, ToolSpec
from dream_memory.core.ports import ChatModel
from dream_memory.core.stop import StopFlag, StopNow


class StoppableModel:
    """A ChatModel that makes no call once a stop was requested (``Interrupted``) and turns an
    abandoned call into ``Interrupted`` too."""

    def __init__(self, inner: ChatModel, stop: StopFlag) -> None:
        self.inner, self.stop = inner, stop

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        if self.stop.requested:
            raise Interrupted(self.stop.signum)
        try:
            self.stop.in_call = True  # inside the try: the stop may cut in right here too
            return self.inner.complete(messages, tools=tools, purpose=purpose)
        except StopNow:
            raise Interrupted(self.stop.signum) from None
        finally:
            self.stop.in_call = False
