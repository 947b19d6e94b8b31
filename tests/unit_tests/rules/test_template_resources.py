"""A chat template's limits hold before a value is made, and its time limit inside the
render (issue 28, item 5): each way the issue found to build gigabytes, or to run past the
limit, is refused at once, in little memory."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from langchain_core.messages import HumanMessage

from langchain_context_governance.rules import templates
from langchain_context_governance.rules.templates import (
    ChatTemplateLimitExceeded,
    render_chat_template,
)

# The most a refused render may allocate at its peak: a few times the size limit (1 million
# characters), never the gigabytes the value would take.
PEAK_BYTES = 64_000_000
BIG = 400_000_000

AMPLIFIERS = {
    "replace": "{{ ('x' * 100000) | replace('x', 'y' * 10000) }}",
    "a replace method": "{{ ('x' * 100000).replace('x', 'y' * 10000) }}",
    "center as a method": f"{{{{ 'x'.center({BIG}) }}}}",
    "ljust": f"{{{{ 'x'.ljust({BIG}) }}}}",
    "zfill": f"{{{{ '1'.zfill({BIG}) }}}}",
    "the format filter's width": f"{{{{ '%{BIG}s' | format('x') }}}}",
    "a % width": f"{{{{ '%{BIG}d' % 1 }}}}",
    "a % star width": f"{{{{ '%*d' % ({BIG}, 1) }}}}",
    "a format method's width": f"{{{{ '{{:>{BIG}}}'.format('x') }}}}",
    "join": "{{ (['y' * 10000] * 100000) | join('z' * 10000) }}",
    "a join method": "{{ ('z' * 10000).join(['y' * 10000] * 100000) }}",
    "expandtabs": "{{ ('\t' * 100000).expandtabs(100000) }}",
    "tojson with an indent": "{{ [[[[[1] * 100] * 100] * 100] * 100] | tojson(indent=100000) }}",
    "a nested list as text": "{{ [['y' * 1000] * 1000] * 1000 }}",
    "a nested list joined": "{{ ([['y' * 1000] * 1000] * 1000) ~ 'x' }}",
    "a nested list as a string": "{{ ([['y' * 1000] * 1000] * 1000) | string }}",
    "indent": "{{ ('\n' * 500000) | indent(100000) }}",
    "wordwrap": "{{ ('x' * 200000) | wordwrap(1, true, 'y' * 100000) }}",
}


@pytest.mark.parametrize("text", list(AMPLIFIERS.values()), ids=list(AMPLIFIERS))
def test_a_value_too_large_is_refused_before_it_is_made(text: str) -> None:
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ChatTemplateLimitExceeded, match="size limit of one render"):
            render_chat_template(text, [HumanMessage("hi")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 2.0
    assert peak < PEAK_BYTES


@pytest.mark.parametrize(
    "text", ["{{ ('www.a.io ' * 90000) | urlize }}", "{{ lipsum(100000) }}"], ids=str
)
def test_what_no_chat_template_uses_and_runs_long_is_not_in_the_sandbox(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(Exception, match=r"urlize|lipsum"):
        render_chat_template(text, [HumanMessage("hi")])
    assert time.monotonic() - started < 1.0


def test_a_long_encoding_stops_at_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "RENDER_TIME_LIMIT_SECONDS", 0.2)
    # Small text, many pieces: the size limit is far, the deadline is checked between them.
    text = "{% for i in range(100000) %}{{ ([[0] * 1000] * 1000) | tojson | length }}{% endfor %}"
    started = time.monotonic()
    with pytest.raises(ChatTemplateLimitExceeded, match="limit of one render"):
        render_chat_template(text, [HumanMessage("hi")])
    assert time.monotonic() - started < 1.5


def test_what_real_templates_do_still_renders() -> None:
    text = (
        "{% for m in messages %}{{ '%s: %d' % (m.role, 3) }}{{ m.content.replace('h', 'H') }}"
        "{{ ', '.join(['a', 'b']) }}{{ '{:>5}'.format('x') }}{{ {'a': [1, 2]} | tojson(indent=2) }}"
        "{{ 'x' | center(9) }}{% endfor %}"
    )
    rendered = render_chat_template(text, [HumanMessage("hi")])
    assert rendered.startswith('user: 3Hia, b    x{\n  "a": [')
