from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable

from langchain_context_governance import get_token_counter, truncate_oversized_messages
from langchain_context_governance.policy.compaction import ResultCompaction, compacted_placeholder
from langchain_context_governance.policy.last_resort import fit_to_budget
from tests.builders import ai_calls, call, result

COUNTER = get_token_counter("approximate")
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 400}}


def tokens(messages):
    return COUNTER.count_messages(messages)


def numbered_lines(count):
    return "".join(f"line {n}\n" for n in range(count))


def test_a_request_that_fits_is_returned_as_it_is(mutation_guard):
    history = mutation_guard.watch([HumanMessage("hi"), ai_calls(call("a")), result("a", "x")])
    assert truncate_oversized_messages(history, max_tokens=1_000) == history


def test_a_huge_newest_result_keeps_its_head_and_tail_and_says_how_to_get_the_rest(
    mutation_guard,
):
    text = numbered_lines(20_000)
    history = mutation_guard.watch(
        [
            SystemMessage("You read files."),
            HumanMessage("summarise the log"),
            ai_calls(call("a", "read_file", path="log.txt")),
            result("a", text, name="read_file"),
        ]
    )
    request = truncate_oversized_messages(history, max_tokens=4_000)
    assert tokens(request) <= 4_000
    assert [type(m) for m in request] == [type(m) for m in history]
    assert request[:3] == history[:3]
    cut = request[3]
    assert cut.tool_call_id == "a" and cut.name == "read_file"
    assert cut.content.startswith("line 0\nline 1\n")
    assert cut.content.endswith("line 19999\n")
    assert "characters of this read_file result were cut here" in cut.content
    assert "narrowed to the part you need" in cut.content


def test_older_compactable_results_are_cleared_before_any_text_is_cut():
    history = [HumanMessage("go")]
    for n in range(6):
        history += [ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "y" * 3_000, name="bash")]
    request = truncate_oversized_messages(history, max_tokens=1_500)
    contents = [m.content for m in request if isinstance(m, ToolMessage)]
    assert compacted_placeholder("bash") in contents
    assert contents[-1] == "y" * 3_000, "the newest call's result is not cleared"
    assert not any("were cut here" in c for c in contents)
    assert tokens(request) <= 1_500


def test_excluded_tools_are_not_cleared_but_cut():
    history = [HumanMessage("go")]
    for n in range(3):
        history += [ai_calls(call(f"c{n}", "memory")), result(f"c{n}", "m" * 8_000)]
    request = truncate_oversized_messages(history, max_tokens=2_000, exclude_tools={"memory"})
    contents = [m.content for m in request if isinstance(m, ToolMessage)]
    assert compacted_placeholder("memory") not in contents
    assert all("characters of this memory result were cut" in c for c in contents)
    assert tokens(request) <= 2_000


def test_a_huge_user_task_is_cut_and_its_images_stay():
    task = HumanMessage([{"type": "text", "text": "TASK " + "t" * 60_000 + " END"}, IMAGE])
    request = truncate_oversized_messages([SystemMessage("rules"), task], max_tokens=3_000)
    blocks = request[1].content
    assert IMAGE in blocks
    text = blocks[0]["text"]
    assert text.startswith("TASK ttt") and text.endswith("ttt END")
    assert "characters of this message were cut here" in text
    assert tokens(request) <= 3_000


def test_the_task_keeps_a_quarter_of_the_budget_while_other_text_is_cut_first():
    task = HumanMessage("fix the parser " * 60)  # about 225 tokens, under 4_000 / 4
    history = [task, ai_calls(call("a", "read_file")), result("a", "z" * 40_000)]
    request = truncate_oversized_messages(history, max_tokens=4_000)
    assert request[0] is task
    assert "were cut here" in request[2].content


def test_when_nothing_can_fit_the_request_goes_out_unchanged():
    history = [SystemMessage("s" * 20_000), HumanMessage("hi " * 3_000)]
    assert truncate_oversized_messages(history, max_tokens=1_000) == history


def test_the_same_request_is_cut_the_same_way():
    history = [HumanMessage("go"), ai_calls(call("a")), result("a", "q" * 50_000)]
    first = truncate_oversized_messages(history, max_tokens=2_000)
    second = truncate_oversized_messages(list(history), max_tokens=2_000)
    assert first == second
    assert truncate_oversized_messages(first, max_tokens=2_000) == first


def test_runnable_form_binds_settings():
    runnable = truncate_oversized_messages(max_tokens=500)
    assert isinstance(runnable, Runnable)
    history = [HumanMessage("go"), ai_calls(call("a")), result("a", "w" * 9_000)]
    assert "were cut here" in runnable.invoke(history)[2].content


text_sizes = st.integers(min_value=0, max_value=30_000)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(text_sizes, min_size=1, max_size=6),
    task_size=text_sizes,
    budget=st.integers(min_value=50, max_value=8_000),
)
def test_cuts_only_text_keep_pairs_and_fit_whenever_possible(sizes, task_size, budget):
    history = [SystemMessage("rules"), HumanMessage("t" * task_size)]
    for n, size in enumerate(sizes):
        history += [ai_calls(call(f"c{n}", "bash")), result(f"c{n}", "r" * size)]
    request = truncate_oversized_messages(history, max_tokens=budget)
    assert [type(m) for m in request] == [type(m) for m in history]
    assert [getattr(m, "tool_call_id", None) for m in request] == [
        getattr(m, "tool_call_id", None) for m in history
    ]
    assert [m for m in request if isinstance(m, (SystemMessage, AIMessage))] == [
        m for m in history if isinstance(m, (SystemMessage, AIMessage))
    ]
    if request != history:
        assert tokens(request) <= budget
    # Marker-only copies of every text message are the most the pass can cut.
    floor = [
        m.model_copy(update={"content": "x" * 200})
        if isinstance(m, (HumanMessage, ToolMessage))
        else m
        for m in history
    ]
    if tokens(floor) <= budget:
        assert tokens(request) <= budget


def test_a_densely_tokenized_message_too_large_to_count_exactly_is_cut_to_fill_its_cap():
    from langchain_context_governance.policy.last_resort import truncate_message

    # 400,000 characters are counted approximately (4 a token) by this counter; tiktoken
    # packs a run of one character far more densely, so a cut sized by the estimate alone
    # would send a small part of what the cap allows.
    counter = get_token_counter("tiktoken", exact_up_to_chars=100_000)
    exact = get_token_counter("tiktoken")
    message = ToolMessage("a" * 400_000, tool_call_id="c1")

    cut = truncate_message(message, 5_000, counter, tool_name="read_file")

    assert 0.9 * 5_000 <= exact.count_message(cut) <= 5_000
    assert truncate_message(message, 5_000, counter, tool_name="read_file") == cut


def test_an_earlier_user_message_is_cut_only_after_the_older_results() -> None:
    """The user's words give way after the other text of the same age (fidelity)."""
    earlier = HumanMessage("context: " + "the spec says " * 600)
    history = [
        HumanMessage("task"),
        ai_calls(call("c1")),
        result("c1", "log line\n" * 2_500),
        earlier,
        AIMessage("noted"),
        HumanMessage("now fix it"),
        ai_calls(call("c2")),
        result("c2", "ok"),
    ]
    fit = fit_to_budget(
        history,
        max_tokens=3_000,
        counter=get_token_counter("approximate"),
        compaction=ResultCompaction(compactable_tools=frozenset()),
    )
    assert fit.within_budget and fit.truncated == (2,)
    assert fit.messages[3] is earlier
