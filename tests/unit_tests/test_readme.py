"""Every Python snippet in README.md runs as written, offline."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_snippets():
    assert len(SNIPPETS) >= 4


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"snippet-{n}" for n in range(len(SNIPPETS))])
def test_snippet_runs(snippet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, str(README), "exec"), {"__name__": "readme_snippet"})
