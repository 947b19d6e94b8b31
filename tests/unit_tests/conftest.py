"""Shared fixtures: a guard that proves a pass left its input untouched, and a guard that
keeps the whole run off the network (real clients talk only to servers on this machine)."""

from __future__ import annotations

import copy
import ipaddress
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

_LOCAL_NAMES = frozenset({None, "", "localhost"})


def _is_local(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class NetworkAccessInTests(OSError):
    """A test tried to reach a host other than this machine."""


@pytest.fixture(autouse=True, scope="session")
def no_network_beyond_this_machine() -> Iterator[None]:
    """Name lookups and connections to anything but loopback fail, whatever keys are set."""
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_local(host):
            raise NetworkAccessInTests(f"tests never reach the network (lookup of {host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    def refuse_remote(address: Any) -> None:
        if isinstance(address, tuple) and not _is_local(address[0]):
            raise NetworkAccessInTests(f"tests never reach the network (connect to {address!r})")

    def connect(self: socket.socket, address: Any) -> None:
        refuse_remote(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        refuse_remote(address)
        return real_connect_ex(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", getaddrinfo)
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        yield


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
