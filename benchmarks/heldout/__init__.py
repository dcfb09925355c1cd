"""The held-out suite: analyst tasks in twelve new domains, frozen, for measuring the agent on unseen work.

The developer who tunes the agent never reads the tasks or the trajectories, only the totals that
``python -m cave.benchmarks.heldout`` prints and writes (per answer kind and per kind of trap).

- ``generate``: the seeded tables (warts included); ``tasks``: the tasks, oracles, correct solutions, traps;
- ``run``: running the code agent on them and reducing the runs to totals; ``__main__``: the command.

``generate.py`` and ``tasks.py`` are frozen: ``tests/benchmarks/test_heldout.py`` checks their SHA-256.
"""
