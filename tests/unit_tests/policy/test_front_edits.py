"""Which edits change the request's front, driven through a small hand-made view."""

from __future__ import annotations

from dataclasses import replace

from langchain_context_governance.policy.decisions import KeptGroup
from langchain_context_governance.policy.front_edits import first_compacted_edit, front_key
from langchain_context_governance.policy.protection import EXCLUDED_TOOL
from tests.unit_tests.policy.test_note_at_cut import cut_view


def test_the_front_changes_with_the_cut_and_the_note_s_contents() -> None:
    view, decisions, _ = cut_view()
    before = front_key(view, decisions)
    assert before != ()
    assert front_key(view, replace(decisions, note_values="other")) != before
    assert front_key(replace(view, full_note=10**6), decisions) != before  # brief now
    assert front_key(view, replace(decisions, cut=decisions.cut + 2)) != before


def test_the_first_compacted_edit_is_the_oldest_result_sent_or_the_front() -> None:
    view, decisions, _ = cut_view()
    compactable = view.compactable
    after_cut = [index for index in compactable if index >= decisions.cut]
    decisions.compacted_count = compactable.index(after_cut[1]) + 1
    before = compactable.index(after_cut[0])
    assert first_compacted_edit(view, decisions, before=before) == after_cut[0]
    # Results before the cut the request does not send change nothing it sends.
    assert first_compacted_edit(view, decisions, before=0) == after_cut[0]
    kept = compactable[0]
    decisions.keep(KeptGroup(start=kept - 1, stop=kept + 1, tokens=100, why=EXCLUDED_TOOL))
    assert first_compacted_edit(view, decisions, before=0) == -1
    assert first_compacted_edit(view, decisions, before=decisions.compacted_count) is None
