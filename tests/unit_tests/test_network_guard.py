"""The suite cannot reach the network: the guard in conftest.py refuses it."""

from __future__ import annotations

import socket

import pytest

from tests.unit_tests.conftest import NetworkAccessInTests


def test_a_lookup_of_a_provider_s_host_is_refused() -> None:
    with pytest.raises(NetworkAccessInTests):
        socket.getaddrinfo("example.com", 443)


def test_a_connection_to_a_remote_address_is_refused() -> None:
    with socket.socket() as sock, pytest.raises(NetworkAccessInTests):
        sock.connect(("192.0.2.1", 443))


def test_this_machine_stays_reachable() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
