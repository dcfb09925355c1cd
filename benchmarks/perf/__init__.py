"""Micro-benchmarks. Each module prints a table with ratios against a baseline run in the same process."""
