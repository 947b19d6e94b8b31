"""Pure decisions over a history: compaction, protection classes, the last resort, the note."""
