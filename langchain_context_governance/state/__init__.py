"""What the governor keeps per conversation: repairs, the compaction replay, the summary,
and the record that travels with the thread."""
