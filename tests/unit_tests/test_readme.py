"""Every Python snippet in README.md and in the pages of docs/ runs as written, offline."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPETS = [
    (page, snippet)
    for page in PAGES
    for snippet in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
]


def test_the_readme_has_snippets():
    assert sum(page.name == "README.md" for page, _ in SNIPPETS) >= 4


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    ("page", "snippet"),
    SNIPPETS,
    ids=[f"{page.relative_to(ROOT)}-{n}" for n, (page, _) in enumerate(SNIPPETS)],
)
def test_snippet_runs(page, snippet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, str(page), "exec"), {"__name__": "readme_snippet"})
