"""The last resort against an oversized request: clear every compactable result, then cut
the text of the largest tool results and user messages down to a head and a tail, lowest
protection class first.

Compaction and cutting work in whole messages and whole groups, so one message larger
than the budget (a 100,000-character file read, a task pasted with a long log) leaves
the request over budget on every call, and the provider rejects it every time. This
pass runs on the finished request and only where it is still over budget:

1. results of compactable tools become the placeholder, oldest first, even the newest
   ones, until the request fits; the results of the newest call stay (the model has not
   seen them yet, and their head and tail tell it more than a placeholder);
2. the text of tool results and user messages larger than a cap is cut to a head and a
   tail around a marker that says how much was cut and how to get it. The cap is the
   largest step of a fixed ladder (80% of the budget, 64%, ...) that makes the request
   fit, so the same oversized message is cut the same way on every call while the rest
   of the request leaves room for it, and the provider's prompt cache keeps it. What
   may be cut grows by protection class (`policy/protection.py`) until the request fits:
   first older results, then earlier user messages, then results of excluded tools, then
   the task, then the newest call's results, and the current user message last of all.
   A user message joined from several turns (see `_added.py`) is cut turn by turn, so
   the task's words can give way while the latest request's stay whole; what governance
   added is never cut.

Only text is cut: images and other blocks, tool-call ids and the pairing of calls and
results stay as they are. The result is a pure function of the request and the settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance._added import (
    USER_PART,
    Block,
    UserPart,
    added_kind,
    join_user_parts,
    user_parts,
)
from langchain_context_governance._messages import (
    content_text_length,
    tool_names_by_call_id,
)
from langchain_context_governance.offload.items import (
    called_result_item,
    calls_by_id,
    readable_text,
    user_text_item,
)
from langchain_context_governance.offload.kept import READ_CONTEXT, Offload, read_call
from langchain_context_governance.policy.compaction import (
    ResultCompaction,
    compact_tool_result,
    result_tool_name,
    results_of_the_newest_call,
)
from langchain_context_governance.policy.protection import (
    CURRENT_TURN,
    EARLIER_USER,
    EXCLUDED_TOOL,
    LATEST_USER,
    LOWEST_FIRST,
    REST,
    TASK,
)
from langchain_context_governance.tokens.counter import (
    MessageTokenCounter,
)
from langchain_context_governance.tuning import (
    CAP_LADDER_RATIO,
    HEAD_SHARE,
    MIN_CAP_TOKENS,
)

# A cut that fills this share of its tokens is kept; below it, at most this many steps grow
# it (see `_grown_to_fit`).
_GOOD_ENOUGH_SHARE = 0.9
_GROWTH_STEPS = 4

# What a message cut by the last resort still costs at least: a head and a tail, and the
# marker between them, with room to spare.
TRUNCATED_AT_LEAST = 128

TOOL_RESULT_MARKER = (
    "\n\n[... {cut:,} of {total:,} characters of this {tool_name} result were cut here to "
    "fit the context window. To see them, call the tool again narrowed to the part you "
    "need (a line range, a path, a filter or a query) ...]\n\n"
)
USER_MESSAGE_MARKER = (
    "\n\n[... {cut:,} of {total:,} characters of this message were cut here to fit the "
    "context window; ask the user for the part you need ...]\n\n"
)
# With offload, the whole text is kept and the marker shows how to read it (offload/).
KEPT_TOOL_RESULT_MARKER = (
    "\n\n[... {cut:,} of {total:,} characters of this {tool_name} result were cut here to "
    "fit the context window; {read} reads the whole result ...]\n\n"
)
KEPT_USER_MESSAGE_MARKER = (
    "\n\n[... {cut:,} of {total:,} characters of this message were cut here to fit the "
    "context window; {read} reads the whole message ...]\n\n"
)


# The protection classes the last resort cuts, lowest first (policy/protection.py): each
# gives way before the next one is touched; the system messages are never cut.
_CUTTABLE = LOWEST_FIRST[: LOWEST_FIRST.index(LATEST_USER) + 1]
_CURRENT_TURN_TIER = _CUTTABLE.index(CURRENT_TURN)


@dataclass(frozen=True)
class BudgetFit:
    """What `fit_to_budget` did to a request: positions of the messages it compacted and
    cut, and whether it had to cut into the current user turn."""

    messages: list[BaseMessage]
    tokens: int
    compacted: tuple[int, ...]
    truncated: tuple[int, ...]
    within_budget: bool
    current_turn_truncated: bool = False


@dataclass(frozen=True)
class _Piece:
    """Text the last resort may cut: a tool result, or one turn (part) of a user message."""

    index: int
    part: int | None
    tier: int
    """The rank of its protection class in `LOWEST_FIRST`."""
    tokens: int


def truncation_marker(
    message: BaseMessage, *, cut: int, total: int, tool_name: str, handle: str | None = None
) -> str:
    """The marker that stands where the middle of `message`'s text was cut; with the
    `handle` its whole text is kept under, the marker shows how to read it."""
    name = tool_name or "tool"
    if handle is not None:
        read = read_call(handle)
        if isinstance(message, ToolMessage):
            return KEPT_TOOL_RESULT_MARKER.format(cut=cut, total=total, tool_name=name, read=read)
        return KEPT_USER_MESSAGE_MARKER.format(cut=cut, total=total, read=read)
    if isinstance(message, ToolMessage):
        return TOOL_RESULT_MARKER.format(cut=cut, total=total, tool_name=name)
    return USER_MESSAGE_MARKER.format(cut=cut, total=total)


def _cut_text(text: str, keep: int, marker_for: Callable[[int], str]) -> str:
    if keep >= len(text):
        return text
    head = int(keep * HEAD_SHARE)
    tail = keep - head
    middle = marker_for(len(text) - keep)
    return text[:head] + middle + (text[len(text) - tail :] if tail else "")


def _cut_content(
    message: BaseMessage, keep: int, *, tool_name: str, handle: str | None
) -> str | list[str | dict[str, Any]]:
    """The content of `message` with its text cut to about `keep` characters."""
    content = message.content
    total = content_text_length(content)

    def marker_for(cut: int) -> str:
        return truncation_marker(message, cut=cut, total=total, tool_name=tool_name, handle=handle)

    if isinstance(content, str):
        return _cut_text(content, keep, marker_for)
    # Every text block keeps its share of `keep`; other blocks (images, files) stay whole.
    blocks: list[str | dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            blocks.append(_cut_text(block, len(block) * keep // total, marker_for))
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                cut = _cut_text(text, len(text) * keep // total, marker_for)
                blocks.append({**block, "text": cut})
            else:
                blocks.append(block)
        else:
            blocks.append(block)
    return blocks


def truncate_message(
    message: BaseMessage,
    max_tokens: int,
    counter: MessageTokenCounter,
    *,
    tool_name: str = "",
    handle: str | None = None,
) -> BaseMessage:
    """A copy of `message` whose text is cut so that it counts at most `max_tokens`.

    Returns `message` itself when it already fits, and the most cut copy (a marker and
    no text) where even that does not fit. `handle`: where the whole text is kept (the
    marker shows how to read it).
    """
    tokens = counter.count_message(message)
    if tokens <= max_tokens:
        return message
    total = content_text_length(message.content)
    if total == 0:
        return message
    keep = total * max_tokens // tokens
    while True:
        copy = _cut_copy(message, keep, tool_name=tool_name, handle=handle)
        copy_tokens = counter.count_message(copy)
        if keep == 0 or copy_tokens <= max_tokens:
            return _grown_to_fit(
                message, copy, keep, copy_tokens, max_tokens, counter, tool_name, handle
            )
        keep = int(keep * CAP_LADDER_RATIO)


def _cut_copy(
    message: BaseMessage, keep: int, *, tool_name: str, handle: str | None
) -> BaseMessage:
    content = _cut_content(message, keep, tool_name=tool_name, handle=handle)
    return message.model_copy(update={"content": content})


def _grown_to_fit(
    message: BaseMessage,
    copy: BaseMessage,
    keep: int,
    copy_tokens: int,
    max_tokens: int,
    counter: MessageTokenCounter,
    tool_name: str,
    handle: str | None,
) -> BaseMessage:
    """The fitting cut, grown where the first guess left much of `max_tokens` unused.

    The first guess scales the text by the message's count, which for a message too large
    to count exactly is an estimate (4 characters a token): text a tokenizer packs more
    densely (a long run of one character, base64) would be cut far shorter than the
    budget allows. A few proportional steps grow it while it still fits.
    """
    total = content_text_length(message.content)
    for _ in range(_GROWTH_STEPS):
        if copy_tokens >= max_tokens * _GOOD_ENOUGH_SHARE or keep >= total or copy_tokens <= 0:
            break
        larger = min(total, keep * max_tokens // copy_tokens)
        if larger <= keep:
            break
        grown = _cut_copy(message, larger, tool_name=tool_name, handle=handle)
        grown_tokens = counter.count_message(grown)
        if grown_tokens > max_tokens:
            break
        copy, keep, copy_tokens = grown, larger, grown_tokens
    return copy


def _compact_until_within(
    messages: list[BaseMessage],
    tokens: list[int],
    *,
    budget: int,
    fixed: int,
    counter: MessageTokenCounter,
    compaction: ResultCompaction,
    names: dict[str, str],
    keeping: _Keeping | None,
) -> list[int]:
    """Compact results oldest first, in place on the copied list and counts, until it
    fits; even the newest `keep_recent`, but never the newest call's results."""
    spared = results_of_the_newest_call(messages)
    total = fixed + sum(tokens)
    compacted: list[int] = []
    for index, message in enumerate(messages):
        if total <= budget:
            break
        if not isinstance(message, ToolMessage) or index in spared:
            continue
        name = result_tool_name(message, names)
        if not compaction.applies_to(name):
            continue
        copy = compact_tool_result(
            message,
            name,
            compaction,
            offload=None if keeping is None else keeping.offload,
            args=None if keeping is None else keeping.args_of(message),
        )
        if copy is message:
            continue
        copy_tokens = counter.count_message(copy)
        if copy_tokens < tokens[index]:
            messages[index] = copy
            total -= tokens[index] - copy_tokens
            tokens[index] = copy_tokens
            compacted.append(index)
    return compacted


def _cap_ladder(budget: int) -> list[int]:
    caps: list[int] = []
    cap = int(budget * CAP_LADDER_RATIO)
    while cap >= MIN_CAP_TOKENS:
        caps.append(cap)
        cap = int(cap * CAP_LADDER_RATIO)
    return caps or [max(budget, 1)]


def fit_to_budget(
    messages: list[BaseMessage],
    *,
    max_tokens: int,
    counter: MessageTokenCounter,
    tools_tokens: int = 0,
    compaction: ResultCompaction | None = None,
    pin_task: bool = True,
    offload: Offload | None = None,
) -> BudgetFit:
    """Bring a request within `max_tokens`: compaction first, then head-and-tail cuts by
    protection class (see the module doc).

    With `pin_task`, the first user turn after the system messages is the task. Returns
    the very same list when the request already fits, and also where even the smallest
    cut of every message leaves it over (`within_budget` is False then). With
    `offload`, what is compacted or cut is kept there whole, and its placeholder or
    marker shows the handle to read it back with.
    """
    fixed = counter.request_overhead + tools_tokens
    tokens = [counter.count_message(message) for message in messages]
    if fixed + sum(tokens) <= max_tokens:
        return BudgetFit(messages, fixed + sum(tokens), (), (), True)
    rules = compaction if compaction is not None else ResultCompaction()
    names = tool_names_by_call_id(messages)
    keeping = None if offload is None else _Keeping(offload, calls_by_id(messages))
    output = list(messages)
    compacted = _compact_until_within(
        output,
        tokens,
        budget=max_tokens,
        fixed=fixed,
        counter=counter,
        compaction=rules,
        names=names,
        keeping=keeping,
    )
    if fixed + sum(tokens) <= max_tokens:
        return BudgetFit(output, fixed + sum(tokens), tuple(compacted), (), True)
    pieces = _pieces(output, tokens, counter, rules, names, pin_task=pin_task)
    for tier in range(len(_CUTTABLE)):
        cuttable = [piece for piece in pieces if piece.tier <= tier]
        if tier > 0 and len(cuttable) == len([p for p in pieces if p.tier < tier]):
            continue
        fit = _cut_to_ladder(
            output, tokens, cuttable, max_tokens, counter, tools_tokens, names, keeping
        )
        if fit.within_budget:
            return replace(fit, compacted=tuple(compacted))
    # Cutting would lose content and still not fit: the request goes out whole, so
    # that governing it again gives it back unchanged.
    total = counter.count_messages(messages) + tools_tokens
    return BudgetFit(messages, total, (), (), False)


def _pieces(
    messages: list[BaseMessage],
    tokens: list[int],
    counter: MessageTokenCounter,
    compaction: ResultCompaction,
    names: dict[str, str],
    *,
    pin_task: bool,
) -> list[_Piece]:
    """What may be cut, each with its protection class."""
    newest = results_of_the_newest_call(messages)
    first_turn = next(
        (i for i, message in enumerate(messages) if not isinstance(message, SystemMessage)), None
    )
    current_user: tuple[int, int] | None = None
    pieces: list[_Piece] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage) and content_text_length(message.content) > 0:
            protection = REST
            if index in newest:
                protection = CURRENT_TURN
            elif compaction.is_excluded(result_tool_name(message, names)):
                protection = EXCLUDED_TOOL
            pieces.append(_Piece(index, None, _CUTTABLE.index(protection), tokens[index]))
        elif isinstance(message, HumanMessage):
            parts = user_parts(message)
            first_user_part = True
            for number, (blocks, kind) in enumerate(parts):
                if kind != USER_PART or not content_text_length(blocks):
                    continue
                is_task = pin_task and index == first_turn and first_user_part
                tier = _CUTTABLE.index(TASK if is_task else EARLIER_USER)
                first_user_part = False
                part_tokens = tokens[index] if len(parts) == 1 else _part_tokens(blocks, counter)
                pieces.append(_Piece(index, number if len(parts) > 1 else None, tier, part_tokens))
                current_user = (index, len(pieces) - 1)
    if current_user is not None:
        position = current_user[1]
        pieces[position] = replace(pieces[position], tier=_CUTTABLE.index(LATEST_USER))
    return pieces


def _part_tokens(blocks: list[Block], counter: MessageTokenCounter) -> int:
    return counter.count_message(HumanMessage(blocks))


def _cut_to_ladder(
    output: list[BaseMessage],
    tokens: list[int],
    pieces: list[_Piece],
    max_tokens: int,
    counter: MessageTokenCounter,
    tools_tokens: int,
    names: dict[str, str],
    keeping: _Keeping | None,
) -> BudgetFit:
    """Cut every piece above the largest cap of the ladder that makes the request fit."""
    fixed = counter.request_overhead + tools_tokens
    ladder = _cap_ladder(max_tokens)
    cut = output
    over: list[_Piece] = []
    for cap in ladder:
        over = [piece for piece in pieces if piece.tokens > cap]
        saved = sum(piece.tokens - cap for piece in over)
        if fixed + sum(tokens) - saved > max_tokens and cap != ladder[-1]:
            continue
        cut = _cut_pieces(output, over, cap, counter, names, keeping)
        total = counter.count_messages(cut) + tools_tokens
        if total <= max_tokens:
            return BudgetFit(
                cut,
                total,
                (),
                tuple(sorted({piece.index for piece in over})),
                True,
                current_turn_truncated=any(piece.tier >= _CURRENT_TURN_TIER for piece in over),
            )
    total = counter.count_messages(cut) + tools_tokens
    return BudgetFit(cut, total, (), (), False)


def _cut_pieces(
    output: list[BaseMessage],
    pieces: list[_Piece],
    cap: int,
    counter: MessageTokenCounter,
    names: dict[str, str],
    keeping: _Keeping | None,
) -> list[BaseMessage]:
    cut = list(output)
    parts_cut: dict[int, dict[int, list[Block]]] = {}
    for piece in pieces:
        message = output[piece.index]
        if piece.part is None:
            handle = None if keeping is None else keeping.handle_of(message)
            cut[piece.index] = truncate_message(
                message, cap, counter, tool_name=_tool_name(message, names), handle=handle
            )
            continue
        blocks, _ = user_parts(message)[piece.part]
        part = HumanMessage(blocks)
        handle = None if keeping is None else keeping.handle_of(part)
        shortened = truncate_message(part, cap, counter, handle=handle)
        content = shortened.content
        assert isinstance(content, list)
        parts_cut.setdefault(piece.index, {})[piece.part] = content
    for index, replaced in parts_cut.items():
        message = output[index]
        assert isinstance(message, HumanMessage)
        parts: list[UserPart] = [
            (replaced.get(number, blocks), kind)
            for number, (blocks, kind) in enumerate(user_parts(message))
        ]
        cut[index] = join_user_parts([parts], template=message)
    return cut


@dataclass(frozen=True)
class _Keeping:
    """Where the last resort keeps what it takes out (offload on), and the request's
    calls by id, whose arguments say what a result held."""

    offload: Offload
    calls: dict[str, tuple[str, Any]]

    def args_of(self, message: ToolMessage) -> Any:
        return self.calls.get(message.tool_call_id, ("", None))[1]

    def handle_of(self, message: BaseMessage) -> str:
        """The handle the whole text of `message` is kept under (a result of
        `read_context`: the handle it read, kept already)."""
        if not isinstance(message, ToolMessage):
            return self.offload.keep(user_text_item(readable_text(message)))
        name = message.name or self.calls.get(message.tool_call_id, ("", None))[0]
        args = self.args_of(message)
        if name == READ_CONTEXT and isinstance(args, dict) and isinstance(args.get("handle"), str):
            return str(args["handle"])
        return self.offload.keep(called_result_item(message, self.calls))


def _tool_name(message: BaseMessage, names: dict[str, str]) -> str:
    return result_tool_name(message, names) if isinstance(message, ToolMessage) else ""


def shortenable_tokens(messages: Sequence[BaseMessage], counter: MessageTokenCounter) -> int:
    """About how many tokens the last resort can take off `messages`: it cuts the text of
    tool results and user messages to a head, a marker and a tail, never an assistant
    message or what governance wrote."""
    return sum(
        max(counter.count_message(message) - TRUNCATED_AT_LEAST, 0)
        for message in messages
        if isinstance(message, (ToolMessage, HumanMessage)) and added_kind(message) is None
    )
