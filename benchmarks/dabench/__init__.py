"""InfiAgent-DABench (ICML 2024): closed-form data-analysis questions over CSV files.

``cave bench dabench --data DIR``, DIR being a copy of the public repository's ``examples/DA-Agent/data``
(the data is CC BY-NC 4.0: it is not shipped with cave). Each question's CSV is injected as ``df``; the agent
answers with ``final_answer({name: value, ...})``, the names from the question's ``@name[...]`` format.

- ``data``: reading DIR; ``score``: the official exact-match rule and a rounded one; ``run``: the runner;
- ``suite``: the ``cave bench dabench`` command.
"""
