"""Small, self-contained experiments on the Dr. MAS algorithm core (run with ``python -m cave.training.experiments.NAME``)."""
