"""Shared fixtures: a guard that proves a pass left its input untouched."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage


class MutationGuard:
    """Snapshots inputs and checks later that neither the list nor a message changed."""

    def __init__(self) -> None:
        self._watched: list[tuple[Sequence[BaseMessage], list[BaseMessage], list[Any]]] = []

    def watch(self, messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
        dumps = [copy.deepcopy(message.model_dump()) for message in messages]
        self._watched.append((messages, list(messages), dumps))
        return messages

    def check(self) -> None:
        for messages, identities, dumps in self._watched:
            assert len(messages) == len(identities), "the input list changed length"
            for index, (now, before) in enumerate(zip(messages, identities, strict=True)):
                assert now is before, f"input list item {index} was replaced"
            for index, (message, dump) in enumerate(zip(messages, dumps, strict=True)):
                assert message.model_dump() == dump, f"input message {index} was mutated"


@pytest.fixture
def mutation_guard() -> Iterator[MutationGuard]:
    guard = MutationGuard()
    yield guard
    guard.check()
