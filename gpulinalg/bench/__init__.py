"""Benchmarks: `gpulinalg-bench ROUTINE` (or `python -m gpulinalg.bench ROUTINE`)."""
