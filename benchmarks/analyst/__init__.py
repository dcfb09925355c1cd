"""The analyst suite: data-analysis tasks phrased the way analysts write them, over seeded messy data.

``cave bench analyst``: the code agent gets the tables as live DataFrames (and the shop as ``db``, a SQLAlchemy
engine on a SQLite file); the JSON baseline gets them through tools whose results come back into its context.
Each answer is compared with an oracle computed from the same seeded data.

- ``generate``: the seeded tables; ``tasks``: the tasks, their oracles and correct solutions;
- ``compare``: reading and comparing an answer; ``run``: running either agent (DABench's runner too);
- ``suite``: the ``cave bench analyst`` command.
"""
