"""Build the notebooks in notebooks/ from the cells below, execute them, and save the outputs.

    python scripts/build_notebooks.py            # all notebooks
    python scripts/build_notebooks.py 02         # those whose name contains "02"

The notebooks are committed with their outputs so they read well on GitHub, and the test
command runs them again (pytest --nbmake notebooks). They run with the scripted model,
offline, unless CONTEXT_GOVERNANCE_NOTEBOOK_REAL_MODEL names a chat model
("openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"): an API key in the environment alone
never makes them call a provider. Here that variable is removed from the kernel's
environment (as `make notebooks` does), so the saved outputs do not depend on who builds
them. Cell ids and metadata are fixed, so a rebuild without a code change gives the same
files.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
# The one variable that lets a notebook call a real model; see the module docstring.
REAL_MODEL_VARIABLE = "CONTEXT_GOVERNANCE_NOTEBOOK_REAL_MODEL"
CELL_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Cell:
    kind: str  # "markdown" or "code"
    source: str


def md(source: str) -> Cell:
    return Cell("markdown", source.strip())


def code(source: str) -> Cell:
    return Cell("code", source.strip())


CHOOSE_MODEL = f'''
import os


def real_chat_model():
    """The chat model {REAL_MODEL_VARIABLE} names ("openai:gpt-4o-mini"), else None.

    Only this variable makes the notebook call a provider (and spend money); an API key in
    the environment alone does not. Without it, the scripted model runs offline.
    """
    name = os.environ.get("{REAL_MODEL_VARIABLE}", "").strip()
    if not name:
        return None
    from langchain.chat_models import init_chat_model

    return init_chat_model(name, temperature=0)
'''

QUICKSTART = [
    md("""
# Quickstart: the governor in front of a chat model (LCEL)

`ContextGovernor` turns a conversation into a request the provider accepts and that fits
the model's input budget. It works on a copy: the history you store is never touched.

This notebook runs offline with `ScriptedChatModel`, a fake chat model that rejects
illegal requests the way a strict provider answers them with a 400. To call a real model
in the last part instead, set `CONTEXT_GOVERNANCE_NOTEBOOK_REAL_MODEL` to a
"provider:model" string (`openai:gpt-4o-mini`, with the provider's package and API key);
an API key alone never makes the notebook call a provider.
"""),
    code(
        CHOOSE_MODEL
        + '''
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_governance import (
    ContextGovernor,
    backfill_missing_tool_results,
    drop_orphan_tool_results,
    enforce_role_alternation,
    microcompact,
    snip_history,
)
from langchain_context_governance import validate_messages
from langchain_context_governance.testing import ScriptedChatModel


def show(messages):
    """One line per message: index, type, tool calls or tool_call_id, start of the text."""
    for index, message in enumerate(messages):
        calls = [call["id"] for call in getattr(message, "tool_calls", [])]
        extra = f" calls={calls}" if calls else ""
        if isinstance(message, ToolMessage):
            extra = f" answers={message.tool_call_id}"
        text = str(message.content).replace("\\n", " ")[:50]
        print(f"{index:2d} {message.type:6}{extra:24} {text}")
'''
    ),
    md("""
## A history that breaks the rules

Histories like this one come from real agents: a tool result whose call was trimmed
away, a call whose result was lost when the process restarted, two user turns in a row,
and large file reads piling up.
"""),
    code("""
def read(call_id, path):
    return AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": path}, "id": call_id}])


def file_text(path, lines=60):
    return "\\n".join(f"{path}:{n}: total = round(subtotal * rate, 2)" for n in range(lines))


history = [
    SystemMessage("You are a coding agent."),
    ToolMessage("stale result", tool_call_id="call_trimmed_away"),
    HumanMessage("Why are the invoice totals off by a cent?"),
    read("call_1", "totals.py"),
    ToolMessage(file_text("totals.py"), tool_call_id="call_1", name="read_file"),
    read("call_2", "tax.py"),
    ToolMessage(file_text("tax.py"), tool_call_id="call_2", name="read_file"),
    read("call_3", "money.py"),
    HumanMessage("Sorry, my laptop restarted."),
    HumanMessage("Please carry on with money.py."),
]
show(history)
"""),
    code("""
for violation in validate_messages(history):
    print(f"message {violation.index}: {violation.rule}: {violation.message}")
"""),
    md("""
## Repaired pass by pass

Each pass is a plain function over a message list (called without messages, it returns a
Runnable). The governor runs them in this order; here we run them by hand to see what
each one does. None of them changes its input.
"""),
    code("""
steps = [
    ("drop_orphan_tool_results", drop_orphan_tool_results),
    ("backfill_missing_tool_results", backfill_missing_tool_results),
    ("microcompact", lambda m: microcompact(m, keep_recent=1, min_chars=500)),
    ("snip_history", lambda m: snip_history(m, max_tokens=900)),
    ("enforce_role_alternation", enforce_role_alternation),
]
messages = history
for name, run_pass in steps:
    messages = run_pass(messages)
    print(f"--- after {name}: {len(messages)} messages")
    show(messages)
"""),
    code("""
print("rules broken now:", validate_messages(messages))
print("stored history untouched:", len(history), "messages,", history[1].content)
"""),
    md("""
## The governor does all of it, with a report

`govern` returns the governed messages and a report: messages each pass changed, tokens
before and after, and the input budget (`context_window_tokens - max_output_tokens -
safety_buffer`).
"""),
    code("""
governor = ContextGovernor(
    context_window_tokens=2_000, max_output_tokens=500, safety_buffer=100, keep_recent=1
)
result = governor.govern(history)
report = result.report
print(f"tokens {report.tokens_before} -> {report.tokens_after}, budget {report.budget}")
print(f"messages {report.messages_before} -> {report.messages_after}")
for name, changed in report.changes.items():
    print(f"  {name:30} {changed}")
"""),
    md("""
## In an LCEL chain

The governor is a Runnable, so it pipes in front of the model. The strict scripted model
rejects the raw history, and accepts the governed one.
"""),
    code("""
from langchain_context_governance.testing import ProviderRejectedRequest

model = real_chat_model() or ScriptedChatModel([AIMessage("money.py rounds each line.")] * 2)
try:
    model.invoke(history)
except ProviderRejectedRequest as error:  # the scripted model's 400
    print(str(error).splitlines()[0])
except Exception as error:  # a real client's own error (BadRequestError, ...)
    print(f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
else:
    print("the model took the raw history (a lenient provider; many refuse it)")

chain = governor | model
answer = chain.invoke(history)
print("answer:", answer.content)
"""),
    code("""
if isinstance(model, ScriptedChatModel):
    print("the model received:")
    show(model.requests[-1])
"""),
]

AGENT = [
    md("""
# A LangGraph agent that stays inside its window

One user task, dozens of tool calls, a 6,000-token window. The agent runs over the small
project bundled with the package (an `invoicing` package), with read-only tools. The
session resumes after a crash that left one tool call without a result, which a provider
would reject on every later call.

First the agent from `langgraph.prebuilt.create_react_agent` with the governor as its
pre-model node, then the same agent from `langchain.agents.create_agent` with the
middleware. Offline, the model is `ScriptedChatModel` playing back an audit of the
project; with `CONTEXT_GOVERNANCE_NOTEBOOK_REAL_MODEL` set to a "provider:model" string, a
real model does the task.
"""),
    code(
        CHOOSE_MODEL
        + '''
import io
import warnings

from IPython.display import Image
from langchain_core.callbacks import BaseCallbackHandler
from matplotlib.figure import Figure

from langchain_context_governance import ContextGovernor
from langchain_context_governance.demo import (
    build_demo_model,
    build_workspace_tools,
    crashed_session_history,
)
from langchain_context_governance import validate_messages
from langchain_context_governance.transcripts import sample_workspace_path

WINDOW = 6_000
STEPS = 30
workspace = sample_workspace_path()
tools = build_workspace_tools(workspace)
print([tool.name for tool in tools])


def make_model():
    scripted = build_demo_model(workspace, steps=STEPS, context_window_tokens=WINDOW)
    return real_chat_model() or scripted


def make_governor(model):
    # A small window on purpose, also for a real model, so governance has work to do.
    return ContextGovernor.from_model(
        model, context_window_tokens=WINDOW, max_output_tokens=1_000, safety_buffer=500, tools=tools
    )


class RequestRecorder(BaseCallbackHandler):
    """Keeps the messages of every chat-model request, for any chat model."""

    def __init__(self):
        self.requests = []

    def on_chat_model_start(self, serialized, messages, **kwargs):
        self.requests.append(list(messages[0]))


def png(figure):
    """Show a matplotlib Figure as a PNG; no pyplot, so no GUI backend is needed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return Image(buffer.getvalue())
'''
    ),
    code('''
def raw_histories(history):
    """The stored history as it stood before each model call: up to each reply."""
    replies = [i for i, m in enumerate(history) if m.type == "ai"][1:]  # skip the crashed turn
    return [history[:i] for i in replies]


def tokens_per_call(governor, history, requests):
    """Raw tokens (the stored history up to each call) and governed tokens per call."""
    raw = [governor.count_tokens(messages) for messages in raw_histories(history)]
    sent = [governor.count_tokens(request) for request in requests]
    return raw, sent


def chart(title, raw, sent, budget):
    figure = Figure(figsize=(8, 3.5), layout="constrained")
    axes = figure.subplots()
    calls = range(1, len(sent) + 1)
    axes.plot(calls, raw, label="raw history")
    axes.plot(calls, sent, label="governed request")
    axes.axhline(WINDOW, color="red", linestyle=":", label="window")
    axes.axhline(budget, color="grey", linestyle="--", label="input budget")
    axes.set(title=title, xlabel="model call", ylabel="prompt tokens")
    axes.legend()
    return png(figure)
'''),
    md("""
## 1. `create_react_agent` with the pre-model node

`governor.as_pre_model_hook()` returns `{"llm_input_messages": governed}`: the model sees
the governed copy, and `state["messages"]`, the stored history, stays whole. The node
keeps the conversation's governance record under `context_governance`, a channel of its
own that the graph's input cannot write, so the checkpointer saves it with the thread and
any worker continues from it.
"""),
    code("""
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

model = make_model()
governor = make_governor(model)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # moved to langchain.agents
    agent = create_react_agent(
        model,
        tools,
        pre_model_hook=governor.as_pre_model_hook(),
        checkpointer=InMemorySaver(),
    )
recorder = RequestRecorder()
config = {"configurable": {"thread_id": "audit"}, "recursion_limit": 500, "callbacks": [recorder]}
final = agent.invoke({"messages": crashed_session_history()}, config)
print(final["messages"][-1].content)
"""),
    code("""
stored = agent.get_state(config).values["messages"]
raw, sent = tokens_per_call(governor, stored, recorder.requests)
print(f"{len(recorder.requests)} model calls; largest raw history {max(raw):,} tokens, "
      f"largest request sent {max(sent):,} tokens, budget {governor.budget:,}")
rejected = sum(
    bool(validate_messages(messages)) or tokens > WINDOW
    for messages, tokens in zip(raw_histories(stored), raw)
)
print(f"raw requests a provider would reject: {rejected} of {len(raw)}")
chart("create_react_agent + pre_model_hook", raw, sent, governor.budget)
"""),
    md("The stored history, which the checkpointer saved, keeps every message:"),
    code("""
tool_results = [m for m in stored if m.type == "tool"]
print(f"stored: {len(stored)} messages, {len(tool_results)} tool results; "
      f"last request sent: {len(recorder.requests[-1])} messages")
print("first messages stored:", [m.type for m in stored[:5]])
"""),
    md("""
## 2. `create_agent` with `ContextGovernanceMiddleware`

The middleware governs each model request, system prompt and tool definitions included;
the agent state is not changed.
"""),
    code("""
from langchain.agents import create_agent

from langchain_context_governance.middleware import ContextGovernanceMiddleware

model = make_model()
governor = make_governor(model)
agent = create_agent(
    model, tools, middleware=[ContextGovernanceMiddleware(governor)], checkpointer=InMemorySaver()
)
recorder = RequestRecorder()
config = {"configurable": {"thread_id": "audit"}, "recursion_limit": 500, "callbacks": [recorder]}
final = agent.invoke({"messages": crashed_session_history()}, config)
stored = agent.get_state(config).values["messages"]
raw, sent = tokens_per_call(governor, stored, recorder.requests)
print(f"{len(recorder.requests)} model calls; stored history {len(stored)} messages; "
      f"largest request sent {max(sent):,} tokens (budget {governor.budget:,})")
chart("create_agent + ContextGovernanceMiddleware", raw, sent, governor.budget)
"""),
]

TRANSCRIPT = [
    md("""
# Inspect a transcript

The package bundles a real-looking transcript: a coding agent's session of about 300
OpenAI-format messages. The same steps work on your own agent's transcript, and the
command line does them too: `context-governance check FILE` and
`context-governance govern FILE --window N`.
"""),
    code('''
import io
from collections import Counter

from IPython.display import Image
from matplotlib.figure import Figure

from langchain_context_governance import ContextGovernor
from langchain_context_governance import validate_messages
from langchain_context_governance.transcripts import load_transcript, sample_transcript_path

transcript = load_transcript(sample_transcript_path())
messages = transcript.messages
print(transcript.format, len(messages), "messages")
print(Counter(message.type for message in messages))


def png(figure):
    """Show a matplotlib Figure as a PNG; no pyplot, so no GUI backend is needed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return Image(buffer.getvalue())
'''),
    md("## Check it"),
    code("""
violations = validate_messages(messages)
print(len(violations), "broken rules:", dict(Counter(v.rule for v in violations)))
for violation in violations[:5]:
    print(f"message {violation.index}: {violation.rule}: {violation.message}")
"""),
    md("## Tokens per message"),
    code("""
governor = ContextGovernor()
tokens = [governor.counter.count_message(message) for message in messages]
colors = {"system": "black", "human": "tab:green", "ai": "tab:blue", "tool": "tab:orange"}
figure = Figure(figsize=(9, 3.5), layout="constrained")
axes = figure.subplots()
bar_colors = [colors.get(m.type, "grey") for m in messages]
axes.bar(range(len(messages)), tokens, color=bar_colors, width=1.0)
for kind, color in colors.items():
    axes.bar([0], [0], color=color, label=kind)
axes.set(title="Tokens per message", xlabel="message index", ylabel="tokens")
axes.legend()
tool_tokens = sum(t for t, m in zip(tokens, messages) if m.type == "tool")
print(f"total {sum(tokens):,} tokens; tool results hold {tool_tokens:,}")
png(figure)
"""),
    md("""
## Govern it under several windows

Without a window there is no snipping: only the repairs and microcompact run. The smaller
the window, the more `snip_history` takes out, in whole tool-call groups.
"""),
    code("""
windows = [None, 64_000, 32_000, 16_000, 8_000]
reports = {}
for window in windows:
    governor = ContextGovernor(context_window_tokens=window, max_output_tokens=2_000)
    result = governor.govern(messages)
    assert validate_messages(result.messages) == []
    reports[window] = result.report
    report = result.report
    print(f"window {str(window):>6}: {report.tokens_before:,} -> {report.tokens_after:,} tokens, "
          f"{report.messages_before} -> {report.messages_after} messages, budget {report.budget}")
"""),
    code("""
passes = list(dict.fromkeys(name for report in reports.values() for name in report.changes))
figure = Figure(figsize=(9, 3.5), layout="constrained")
axes = figure.subplots()
width = 0.8 / len(windows)
for position, window in enumerate(windows):
    changes = [reports[window].changes.get(name, 0) for name in passes]
    offsets = [i + position * width for i in range(len(passes))]
    axes.bar(offsets, changes, width=width, label=f"window {window or 'none'}")
axes.set_xticks([i + 0.4 - width / 2 for i in range(len(passes))], passes, rotation=15)
axes.set(title="Messages each pass changed or removed", ylabel="messages")
axes.legend()
png(figure)
"""),
]

NOTEBOOKS = {
    "01_quickstart_lcel.ipynb": QUICKSTART,
    "02_langgraph_agent.ipynb": AGENT,
    "03_inspect_a_transcript.ipynb": TRANSCRIPT,
}


def build(cells: list[Cell]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    for number, cell in enumerate(cells):
        new_cell = nbformat.v4.new_code_cell
        if cell.kind == "markdown":
            new_cell = nbformat.v4.new_markdown_cell
        notebook.cells.append(new_cell(cell.source, id=f"cell-{number:02d}"))
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return notebook


def execute(notebook: nbformat.NotebookNode) -> None:
    os.environ.pop(REAL_MODEL_VARIABLE, None)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()
    # Timestamps and kernel versions would change the files on every rebuild.
    notebook.metadata = build([]).metadata
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)


def main(selected: list[str]) -> None:
    NOTEBOOKS_DIR.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        if selected and not any(part in name for part in selected):
            continue
        notebook = build(cells)
        execute(notebook)
        nbformat.write(notebook, NOTEBOOKS_DIR / name)
        print(f"wrote {NOTEBOOKS_DIR / name}")


if __name__ == "__main__":
    main(sys.argv[1:])
