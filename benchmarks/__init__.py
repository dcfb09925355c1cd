"""Benchmarks: BFCL, Tau2-bench, the data-intensive suite, and perf micro-benchmarks."""
