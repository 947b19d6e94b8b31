"""What the governor keeps per conversation: repairs, the compaction replay, the summary."""
