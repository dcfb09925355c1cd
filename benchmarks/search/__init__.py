"""Dr. MAS's search setting: a synthetic encyclopedia, a BM25 index, the router/search/answer team, EM/F1.

``corpus`` (the seeded generator and its questions), ``index`` (SQLite FTS5 and ``search(query, k) -> [Hit]``),
``team`` (the custom pattern: router -> search / answer, up to 4 steps), ``run`` (the code team and the JSON
baseline, ``aevaluate`` and ``scores``). ``cave bench search`` runs them; the trainer's reward is ``exact_match``.
"""

from cave.benchmarks.search.corpus import Corpus, Passage, make_corpus
from cave.benchmarks.search.index import Hit, open_index, search

__all__ = ["Corpus", "Hit", "Passage", "make_corpus", "open_index", "search"]
