"""DataBench (SemEval-2025 Task 8): closed-form questions over real tables, scored by the competition's own rule.

``cave bench databench --data DIR``, DIR being a copy of the data (it is not shipped with cave, and nothing is
downloaded at run time): a QA table with the columns ``question``, ``answer``, ``type`` (boolean, category,
number, list[category], list[number]) and ``dataset``, and each dataset's table at ``DIR/DATASET/all.parquet`` (or
``DIR/data/DATASET/all.parquet``; ``sample.parquet`` and ``sample_answer`` with ``--lite``). The table is injected as
``df``; the answer object is read as the competition reads a response, ``str(answer)``, and compared by its rule.

- ``data``: reading DIR; ``score``: the competition's compare rule; ``run``: the runner; ``suite``: the command.
"""
