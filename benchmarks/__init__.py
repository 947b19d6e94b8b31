"""Benchmarks of langchain-context-governance against LangChain's own utilities.

Reusable pieces: `benchmarks.histories` (seeded agent histories), `benchmarks.loop` (the
tool-loop simulation and its prefix-cache metrics), `benchmarks.policies` (the request
builders compared), `benchmarks.timing` (cold and steady timings). Run everything with
`python benchmarks/run.py`.
"""
