"""Every tuning share of the policies, in one place: numbers chosen with benchmarks.

These are not settings a user passes (those are `settings.GovernorSettings`' fields); they
are the proportions the policies are built with, each with the reason it has its value.
Most were chosen with the trade-off table in benchmarks/README.md (27 real agent runs,
the BFCL tool-heavy replay and a 300-iteration tool loop); `benchmarks/policies.py`
varies them there. A change here changes requests: the record's settings digest does not
see it, so bump `state/record.RECORD_VERSION` with it.

Example:
    >>> 0 < DEFAULT_LOW_WATERMARK < DEFAULT_HIGH_WATERMARK <= 1
    True
"""

from __future__ import annotations

# --- The cache-aware policy (policy/watermarks.py, policy/edit_trigger.py, policy/cut.py) ---

DEFAULT_HIGH_WATERMARK = 1.0
"""Share of the room history has above which the policy edits (the default of the
`high_watermark` setting): edit nothing while the request fits. A high watermark under 1
gives the tool-heavy replay fewer cache hits than trim_messages (0.95: 59.1% against
60.4%)."""

DEFAULT_LOW_WATERMARK = 0.3
"""Share of the room an edit brings history down to (the default of `low_watermark`):
0.3 shows the model more than 0.2 (86.6% of the needed facts on the real runs against
84.9%) within the targets (95.2% cache hits, 0.565x ClearToolUsesEdit); 0.5 goes over them
(94.7%, 0.626)."""

COMPACTION_ENOUGH_SHARE = 0.25
"""A step compacts the oldest results down to the low watermark; where that leaves history
above this share of the way from the low to the high watermark, it cuts in the same step
too (down to the low watermark): one edit of the request instead of a compaction now and
another a few calls later."""

TURN_START_SHARE = 0.5
"""Where a call starts a user turn, it edits (compacts and cuts down to the low watermark)
once history is past this share of the way from the low to the high watermark, so that
the turn's tool loop, and the reasoning bound to it, runs without an edit."""

EARLIER_USERS_SHARE = 0.1
"""Share of the room history has that the earlier user messages kept across a cut may take
(the newest kept, the oldest giving way first): the user's recent words stay verbatim
without crowding out the newest history where the room is small."""

NOTE_VALUES_SHARE = 0.085
"""Share of the room history has that a cut reserves for the values of the messages it
leaves out, listed in the data turn after its note (policy/note.py); chosen with the
trade-off table, as the watermarks."""

NOTE_VALUES_MAX_TOKENS = 1_000
"""The most tokens those values take, however large the room."""

FULL_NOTE_SHARE = 0.05
"""The note explains itself ("Work done in them may already be complete; ...") where that
takes at most this share of the room history has, and is brief where the room is small."""

MIN_SUMMARY_TOKENS = 64
"""The smallest summary of a cut worth asking the summary model for, in tokens (it may
take a tenth of the budget otherwise, and no more than the note's room)."""

# --- Cuts in whole messages (policy/task.py, policy/snip.py, policy/cut.py) ---

TASK_SHARE_OF_BUDGET = 0.25
"""The task (the conversation's first user message) is pinned verbatim where it takes at
most this share of the budget, and cut to it where larger: enough for a long brief,
while three quarters stay for the work itself."""

KEEP_WITHOUT_USER_MESSAGE = 4
"""Messages the `keep_recent` mode's cut keeps when the history holds no user message to
anchor the request on."""

# --- The last resort (policy/last_resort.py) ---

CAP_LADDER_RATIO = 0.8
"""Each step of the cap ladder is this share of the one before: at most a fifth of the
room a message could have had is given away, and a message's cut stays the same over the
many calls in which the rest of the request grows within one step."""

MIN_CAP_TOKENS = 16
"""The last step of the ladder: about the marker alone, the most a message can be cut."""

HEAD_SHARE = 0.6
"""Share of the kept text shown before the marker (the rest is the tail): the start of a
file or log says what it is, its end holds the latest lines and error messages."""

# --- Reading kept content back (offload/tool.py) ---

PAGE_SHARE = 0.1
"""A page `read_context` returns is this share of the input budget: a read leaves the
conversation most of its room, and a page the next compaction clears costs little."""
