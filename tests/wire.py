"""The real provider clients, pointed at a recording server on 127.0.0.1.

`RecordingServer` is a threading HTTP server on an ephemeral loopback port. It keeps the
JSON body of every request it gets and answers with the smallest response each provider's
client accepts, so a client returns normally, offline, with a dummy key. Each client gets
its own path prefix (`/openai`, `/anthropic`, `/mistral`, `/gemini`), set through the
client's own base-URL setting (`base_url`, `endpoint` for ChatMistralAI; the google-genai
SDK behind ChatGoogleGenerativeAI takes `base_url` as its HTTP options), so the server
knows which fake response to send. ChatOpenAI keeps OpenAI's own base URL, as a user of
OpenAI's API has it (the governor picks its profile from it), and reaches the server
through an HTTP transport that sends every request to the loopback address instead.

`WireClients.send(name, messages)` gives back what that client put on the wire for
`messages`: the request body as a dict, or `ClientRefusal` when the client raised before
sending anything (langchain-anthropic, for instance, refuses a late system message).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_mistralai import ChatMistralAI
from langchain_openai import ChatOpenAI

CLIENT_PROFILES: dict[str, str] = {
    "ChatOpenAI": "openai",
    "ChatAnthropic": "anthropic",
    "ChatMistralAI": "mistral",
    "ChatGoogleGenerativeAI": "gemini",
}
"""Each client and the governor profile a user of that client picks; the profile name is
also the client's path prefix on the recording server."""

_CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-wire",
    "object": "chat.completion",
    "created": 0,
    "model": "wire",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
_ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_wire",
    "type": "message",
    "role": "assistant",
    "model": "wire",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
_GEMINI_RESPONSE: dict[str, Any] = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "ok"}]},
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    "modelVersion": "wire",
}
_RESPONSES_API_RESPONSE: dict[str, Any] = {
    "id": "resp_wire",
    "object": "response",
    "created_at": 0,
    "status": "completed",
    "model": "wire",
    "output": [
        {
            "type": "message",
            "id": "msg_wire",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 1,
        "output_tokens": 1,
        "total_tokens": 2,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}
_RESPONSES: dict[str, dict[str, Any]] = {
    "openai": _CHAT_COMPLETION,
    "mistral": _CHAT_COMPLETION,
    "anthropic": _ANTHROPIC_MESSAGE,
    "gemini": _GEMINI_RESPONSE,
}


@dataclass(frozen=True)
class CapturedRequest:
    """One request the server received: the client's path prefix, full path, JSON body,
    and headers (lowercase names)."""

    prefix: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientRefusal:
    """The client raised before a request reached the server."""

    error: str


class _RecordingHandler(BaseHTTPRequestHandler):
    server: _RecordingHTTPServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        prefix = self.path.strip("/").split("/", 1)[0]
        with self.server.lock:
            headers = {name.lower(): value for name, value in self.headers.items()}
            self.server.captured.append(CapturedRequest(prefix, self.path, body, headers))
            queued = self.server.replies.get(prefix)
            reply = queued.pop(0) if queued else None
        if reply is None and self.path.endswith("/responses"):
            reply = _RESPONSES_API_RESPONSE
        reply = reply or _RESPONSES.get(prefix)
        if reply is None:
            self.send_error(404, f"no fake provider under /{prefix}")
            return
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read the captured bodies, not an access log."""


class _RecordingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RecordingHandler)
        self.lock = threading.Lock()
        self.captured: list[CapturedRequest] = []
        # Scripted replies, oldest first, per path prefix; the fixed reply when none is left.
        self.replies: dict[str, list[dict[str, Any]]] = {}


class RecordingServer:
    """A loopback HTTP server that records request bodies; use as a context manager."""

    def __init__(self) -> None:
        self._server = _RecordingHTTPServer()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def reply_next(self, prefix: str, body: dict[str, Any]) -> None:
        """Answer the next request under `prefix` with `body` (a provider's response JSON)."""
        with self._server.lock:
            self._server.replies.setdefault(prefix, []).append(body)

    def take(self) -> list[CapturedRequest]:
        """The requests received since the last call, oldest first."""
        with self._server.lock:
            captured, self._server.captured = self._server.captured, []
        return captured


class LoopbackTransport(httpx.BaseTransport):
    """Sends each request to the recording server under `prefix`, whatever its host."""

    def __init__(self, base_url: str, prefix: str) -> None:
        self._server = httpx.URL(base_url)
        self._prefix = prefix
        self._transport = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(
            scheme=self._server.scheme,
            host=self._server.host,
            port=self._server.port,
            path=f"/{self._prefix}{request.url.path}",
        )
        return self._transport.handle_request(request)

    def close(self) -> None:
        self._transport.close()


def build_clients(base_url: str) -> dict[str, BaseChatModel]:
    """The four clients with dummy keys, no retries, each under its own path prefix."""
    return {
        "ChatOpenAI": ChatOpenAI(
            model="gpt-4o-mini",
            api_key="sk-wire",
            max_retries=0,
            http_client=httpx.Client(transport=LoopbackTransport(base_url, "openai")),
        ),
        "ChatAnthropic": ChatAnthropic(
            model_name="claude-sonnet-4-5",
            api_key="sk-wire",
            base_url=f"{base_url}/anthropic",
            max_retries=0,
            timeout=10,
            stop=None,
        ),
        "ChatMistralAI": ChatMistralAI(
            model_name="mistral-small-latest",
            api_key="wire",
            endpoint=f"{base_url}/mistral/v1",
            max_retries=0,
        ),
        "ChatGoogleGenerativeAI": ChatGoogleGenerativeAI(
            model="gemini-2.5-flash",
            google_api_key="wire",
            base_url=f"{base_url}/gemini",
            max_retries=0,
        ),
    }


class WireClients:
    """The real clients and the server they talk to."""

    def __init__(self, server: RecordingServer) -> None:
        self.server = server
        self.clients = build_clients(server.base_url)

    def send(self, name: str, messages: Sequence[BaseMessage]) -> dict[str, Any] | ClientRefusal:
        """The body client `name` sends for `messages`, or why it sent nothing."""
        self.server.take()
        try:
            self.clients[name].invoke(list(messages))
        except Exception as error:  # any client-side refusal is an outcome to report
            if self.server.take():
                raise  # the request went out: the failure is the harness's, not the client's
            return ClientRefusal(f"{type(error).__name__}: {error}")
        captured = self.server.take()
        if len(captured) != 1 or captured[0].prefix != CLIENT_PROFILES[name]:
            paths = [request.path for request in captured]
            raise AssertionError(f"{name} sent {len(captured)} requests: {paths}")
        return captured[0].body


def with_positional_call_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with every call and its results renamed to an id unique to its position.

    A result is paired with a call of the assistant message right before its run of
    results, by id, the way the APIs that take ids pair them. Gemini's wire format has no
    ids, so a client that pairs the same way sends the very same body for both lists; a
    client that pairs by id across the whole history (and gives a reused id the first
    result it finds) does not.
    """
    renamed: list[BaseMessage] = []
    fresh: dict[str, list[str]] = {}
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            fresh = {}
            calls = []
            for position, call in enumerate(message.tool_calls):
                new_id = f"p{index}x{position}"
                fresh.setdefault(str(call.get("id")), []).append(new_id)
                calls.append({**call, "id": new_id})
            renamed.append(message.model_copy(update={"tool_calls": calls}))
        elif isinstance(message, ToolMessage):
            pending = fresh.get(message.tool_call_id) or [f"orphan{index}"]
            renamed.append(message.model_copy(update={"tool_call_id": pending.pop(0)}))
        else:
            fresh = {}
            renamed.append(message)
    return renamed
