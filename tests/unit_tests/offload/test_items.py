"""What is kept of a message, and its handle: a digest of what is kept, the same everywhere."""

from __future__ import annotations

import subprocess
import sys

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_context_governance._added import cut_note_turn, join_user_parts, user_parts
from langchain_context_governance.offload.items import (
    BRIEF_ARGUMENTS_CHARACTERS,
    HANDLE_CHARACTERS,
    READ_CONTEXT,
    answered_call,
    brief_call,
    called_result_item,
    calls_by_id,
    cut_item,
    is_handle,
    message_item,
    readable_text,
    result_item,
)
from tests.builders import ai_calls, call, result


def test_a_handle_is_short_opaque_and_the_same_in_every_process() -> None:
    item = result_item(result("c1", "secret token 991"), "bash", {"command": "cat .env"})
    assert is_handle(item.handle) and len(item.handle) == HANDLE_CHARACTERS
    assert "991" not in item.handle
    code = (
        "from langchain_core.messages import ToolMessage\n"
        "from langchain_context_governance.offload.items import result_item\n"
        "message = ToolMessage('secret token 991', tool_call_id='c1')\n"
        "print(result_item(message, 'bash', {'command': 'cat .env'}).handle)\n"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == item.handle


def test_the_same_content_gives_the_same_item_and_other_content_another() -> None:
    first = result_item(result("c1", "a.py"), "ls", {"path": "."})
    assert result_item(result("c2", "a.py"), "ls", {"path": "."}) == first
    assert result_item(result("c1", "b.py"), "ls", {"path": "."}).handle != first.handle
    assert result_item(result("c1", "a.py"), "ls", {"path": "src"}).handle != first.handle
    user = message_item(HumanMessage("a.py"))
    assert user.handle != first.handle and user.value["role"] == "user"


def test_the_description_names_the_call_briefly_on_one_line() -> None:
    brief = brief_call("bash", {"command": "pytest -q\n  tests/unit " + "x" * 80})
    assert "\n" not in brief
    assert brief.startswith('bash(command="pytest -q\\n tests/unit')
    assert len(brief) == len("bash()") + BRIEF_ARGUMENTS_CHARACTERS
    assert brief_call("now", {}) == "now()"
    assert (
        brief_call(READ_CONTEXT, {"handle": "k7f3q2m5xa", "pattern": "a" * 60}, limit=None)[-4:]
        == 'aa")'
    )


def test_readable_text_shows_calls_blocks_and_only_the_users_words() -> None:
    asking = AIMessage(
        [{"type": "text", "text": "Let me look."}, {"type": "image_url", "image_url": {}}],
        tool_calls=[call("c1", "grep", pattern="TODO")],
    )
    assert readable_text(asking) == 'Let me look.\n[image_url block]\ngrep({"pattern": "TODO"})'
    joined = join_user_parts(
        [user_parts(HumanMessage("fix a.py")), user_parts(cut_note_turn("[Note]"))]
    )
    assert readable_text(joined) == "fix a.py"
    assert message_item(asking).about == "assistant message calling grep"


def test_a_result_of_read_context_is_not_kept_again() -> None:
    read = ToolMessage("x" * 5_000, tool_call_id="r1")
    item = result_item(read, READ_CONTEXT, {"handle": "k7f3q2m5xa", "offset": 100})
    assert item.characters < 100
    assert 'read_context(handle="k7f3q2m5xa", offset=100) reads it' in item.value["text"]


def test_a_result_finds_its_call_in_the_history_or_by_id() -> None:
    history = [
        HumanMessage("go"),
        ai_calls(call("a", "grep", pattern="x"), call("b", "read_file", path="y.py")),
        result("a", "1"),
        result("b", "2"),
    ]
    assert answered_call(history, 3) == ("read_file", {"path": "y.py"})
    calls = calls_by_id(history)
    assert calls["a"] == ("grep", {"pattern": "x"})
    kept = called_result_item(history[3], calls)  # type: ignore[arg-type]
    assert kept == result_item(history[3], "read_file", {"path": "y.py"})  # type: ignore[arg-type]
    orphan = [HumanMessage("go"), result("z", "3", name="ls")]
    assert answered_call(orphan, 1) == ("ls", None)


def test_a_cut_lists_its_messages_oldest_first() -> None:
    parts = [message_item(HumanMessage("first")), message_item(AIMessage("second"))]
    cut = cut_item(parts)
    assert cut.value["parts"] == [part.handle for part in parts]
    assert (cut.about, cut.characters) == ("2 omitted messages", 11)
    assert cut_item(parts[::-1]).handle != cut.handle
