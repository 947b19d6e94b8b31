"""Every Python snippet of docs/*.md runs as written, offline."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
SNIPPETS = [
    (path, snippet)
    for path in sorted(DOCS.glob("*.md"))
    for snippet in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    ("path", "snippet"), SNIPPETS, ids=[f"{p.name}-{n}" for n, (p, _) in enumerate(SNIPPETS)]
)
def test_snippet_runs(
    path: Path, snippet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, str(path), "exec"), {"__name__": "docs_snippet"})
