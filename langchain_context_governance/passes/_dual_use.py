"""The dual use of every pass: a plain function, or a Runnable when called without messages."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, cast, overload

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import MessageLikeRepresentation
from langchain_core.runnables import Runnable, RunnableLambda

P = ParamSpec("P")

MessagesRunnable = Runnable[Sequence[MessageLikeRepresentation], list[BaseMessage]]


class MessagesPass(Protocol, Generic[P]):
    """A pass called with messages returns messages; called without, a Runnable."""

    __name__: str

    @overload
    def __call__(
        self, messages: None = None, /, *args: P.args, **kwargs: P.kwargs
    ) -> MessagesRunnable: ...

    @overload
    def __call__(
        self, messages: Sequence[MessageLikeRepresentation], /, *args: P.args, **kwargs: P.kwargs
    ) -> list[BaseMessage]: ...


def runnable_when_called_without_messages(
    func: Callable[Concatenate[Sequence[MessageLikeRepresentation], P], list[BaseMessage]],
) -> MessagesPass[P]:
    """Give a pass the dual use of `langchain_core.messages.trim_messages`.

    `func(messages, **settings)` runs the pass; `func(**settings)` returns a Runnable
    with the settings bound, so the pass pipes into LCEL: `microcompact(keep_recent=5) | model`.
    """

    run = cast("Callable[..., list[BaseMessage]]", func)

    @functools.wraps(func)
    def dual_use(
        messages: Sequence[MessageLikeRepresentation] | None = None, /, **settings: Any
    ) -> list[BaseMessage] | MessagesRunnable:
        if messages is not None:
            return run(messages, **settings)

        def run_pass(bound_messages: Sequence[MessageLikeRepresentation]) -> list[BaseMessage]:
            return run(bound_messages, **settings)

        return RunnableLambda(run_pass, name=func.__name__)

    return cast("MessagesPass[P]", dual_use)
