"""The profile picked from each real client: `from_model` and the middleware, on the wire.

For ChatOpenAI (on OpenAI's own base URL), ChatAnthropic, ChatMistralAI and
ChatGoogleGenerativeAI, built offline with dummy keys (tests/wire.py), the governor that
`ContextGovernor.from_model(client)` builds, and the `create_agent` middleware calling
that client, must pick the client's profile without being told, and produce requests
that `validate_messages(..., provider=<the client's profile>)` accepts and that the
provider rules of tests/wire_rules.py accept on the body the client really sends.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import ContextGovernor, validate_messages
from tests.strategies import budgets, histories
from tests.wire import CLIENT_PROFILES, ClientRefusal, RecordingServer, WireClients
from tests.wire_rules import wire_violations

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
)

from langchain_context_governance import ContextGovernanceMiddleware

# A few dozen histories per client: each is a governed request sent over HTTP.
PROFILE_EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
CLIENTS = list(CLIENT_PROFILES)


@pytest.fixture(scope="module")
def wire() -> Iterator[WireClients]:
    with RecordingServer() as server:
        yield WireClients(server)


def has_conversation(history: Sequence[BaseMessage]) -> bool:
    return any(not isinstance(message, ToolMessage) for message in history)


def sized_for(client: Any, budget: int | None) -> ContextGovernor:
    """`from_model(client)` with the whole window as the budget; no window: repairs only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "never trims", for budget None
        return ContextGovernor.from_model(
            client, context_window_tokens=budget, max_output_tokens=0, safety_buffer=0
        )


def rejected_on_the_wire(wire: WireClients, client: str, messages: list[BaseMessage]) -> list[str]:
    payload = wire.send(client, messages)
    if isinstance(payload, ClientRefusal):
        return [f"client refused: {payload.error}"]
    return [str(v) for v in wire_violations(CLIENT_PROFILES[client], payload)]


@pytest.mark.parametrize("client", CLIENTS)
def test_from_model_picks_the_client_s_profile(wire: WireClients, client: str) -> None:
    governor = ContextGovernor.from_model(wire.clients[client])
    assert governor.provider == CLIENT_PROFILES[client]
    assert governor.profile.name == CLIENT_PROFILES[client]


@pytest.mark.parametrize("client", CLIENTS)
@PROFILE_EXAMPLES
@given(history=histories(), budget=st.one_of(st.none(), budgets))
def test_from_model_requests_pass_the_client_s_profile_and_the_wire(
    wire: WireClients, client: str, history: list[BaseMessage], budget: int | None
) -> None:
    if not has_conversation(history):
        return
    messages = sized_for(wire.clients[client], budget).invoke(history)
    assert validate_messages(messages, provider=CLIENT_PROFILES[client]) == []
    assert rejected_on_the_wire(wire, client, messages) == []


class RecordRequests(AgentMiddleware):  # type: ignore[type-arg]
    """Inside the governance middleware: keeps each request as the model receives it."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[list[BaseMessage]] = []

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        system = [request.system_message] if request.system_message is not None else []
        self.requests.append([*system, *request.messages])
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        raise NotImplementedError("the tests call the agent synchronously")


AGENT_HISTORIES = histories(max_size=8).filter(has_conversation)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("sized", ["from_model", "per call"])
@PROFILE_EXAMPLES
@given(history=AGENT_HISTORIES)
def test_the_middleware_requests_pass_the_client_s_profile_and_the_wire(
    wire: WireClients, client: str, sized: str, history: list[BaseMessage]
) -> None:
    """With `from_model(client)`, or a governor without a window that the middleware sizes
    (and profiles) from `request.model` on each call."""
    model = wire.clients[client]
    governor = ContextGovernor.from_model(model) if sized == "from_model" else ContextGovernor()
    recorder = RecordRequests()
    agent = create_agent(
        model,
        [],
        system_prompt=SystemMessage("You help."),
        middleware=[ContextGovernanceMiddleware(governor), recorder],
    )
    wire.server.take()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a client's own notes on empty text
        agent.invoke({"messages": [*history, HumanMessage("go on")]})
    [request] = recorder.requests
    assert validate_messages(request, provider=CLIENT_PROFILES[client]) == []
    [captured] = wire.server.take()
    assert wire_violations(CLIENT_PROFILES[client], captured.body) == []
