"""A seeded synthetic encyclopedia and its questions: made-up people, cities and companies, so no model knows them.

Every fact is one passage, written with one of several paraphrase templates; each question names one entity and
its answer sits in a passage that the question's words find. Two-hop questions name a company and ask about its
founder (or a person and ask about their birthplace): the first passage gives the bridge entity, whose own passage
holds the answer, and never names the first entity, so two searches are needed. Distractors: people who share a
first or last name, and generic passages that mention many names and no facts.

>>> c = make_corpus(0)
>>> len(c.passages) > 2000, c.passages[0] == make_corpus(0).passages[0]
(True, True)
>>> q = c.questions("test")[0]
>>> sorted(q) == ["answer", "hops", "id", "question", "split"]
True

``split_questions`` is the training data generator's view (``data: {generator: "cave.benchmarks.search.corpus:split_questions", split: test}``): ``n``
questions of one split of the encyclopedia the ``search`` tool indexes, in a seeded order that mixes hop counts.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

DEFAULT_SEED = 0
SYLLABLES = "ka lo mi ren tas vel dor an shi mar zu ilo bre tov yan qua fen gar hol nis ped rua sol tem wix".split()
OCCUPATIONS = "astronomer cartographer glassblower botanist violinist engineer sculptor archivist chemist".split()
INDUSTRIES = "shipbuilding textiles optics brewing printing ceramics clockmaking".split()
COUNTRIES = "Veldoria Marqesh Tovany Sunnreach Ilbrand Quorvale".split()

PERSON_FACTS = {
    "born": ["{name} was born in {year}.", "The {occupation} {name} came into the world in {year}."],
    "birthplace": ["{name} was born in the city of {city}.", "{city} is the hometown of {name}."],
    "occupation": ["{name} worked as a {occupation}.", "By profession, {name} was a {occupation}."],
}
CITY_FACTS = {
    "river": ["The river {river} flows through {name}.", "{name} lies on the banks of the {river}."],
    "country": ["{name} is a city in {country}.", "The city of {name} belongs to {country}."],
    "founded": ["{name} was founded in {year}.", "Settlers established {name} in {year}."],
}
COMPANY_FACTS = {
    "founder": ["{name} was founded by {founder}.", "The founder of {name} was {founder}."],
    "headquarters": ["{name} has its headquarters in {city}.", "{name} is based in {city}."],
    "industry": ["{name} is a {industry} company.", "{name} works in {industry}."],
}


@dataclass(frozen=True)
class Passage:
    id: int
    title: str
    text: str


@dataclass
class Corpus:
    seed: int
    passages: list[Passage]
    qa: list[dict[str, Any]] = field(default_factory=list)

    def questions(self, split: str | None = None, hops: int | None = None) -> list[dict[str, Any]]:
        """The questions of ``split`` ("train" / "test"; None: all), optionally of one hop count."""
        return [q for q in self.qa if (split is None or q["split"] == split) and (hops is None or q["hops"] == hops)]


def _name(rng: random.Random, parts: int, taken: set[str]) -> str:
    while True:
        name = "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def split_of(qid: str, test_share: float = 0.25) -> str:
    """A question's split, from a hash of its id: stable whatever else the generator adds.

    >>> split_of("p1-born") in ("train", "test")
    True
    """
    h = int(hashlib.sha256(qid.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if h < test_share else "train"


def split_questions(split: str, n: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The first ``n`` questions of ``split`` (all when ``n`` is None or larger) in an order shuffled by ``seed``.

    The questions are always those of the ``DEFAULT_SEED`` encyclopedia, the one ``search`` looks facts up in (a
    question about another corpus would be unanswerable); ``seed`` only orders them, so a smaller ``n`` is a prefix
    of a larger one and train and test never share a question, whatever the seeds and sizes.

    >>> train, test = split_questions("train", 50), split_questions("test", 50)
    >>> len(train), {q["split"] for q in train}, {q["split"] for q in test}
    (50, {'train'}, {'test'})
    >>> {q["question"] for q in train} & {q["question"] for q in test}
    set()
    >>> split_questions("test", 3, seed=1) == split_questions("test", 10, seed=1)[:3] != split_questions("test", 3)
    True
    """
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; the search questions have train and test")
    qs = list(make_corpus(DEFAULT_SEED).questions(split))
    random.Random(f"search_qa:{seed}").shuffle(qs)
    return [dict(q) for q in qs[:n]]


@lru_cache(maxsize=4)
def make_corpus(
    seed: int = DEFAULT_SEED, people: int = 500, cities: int = 150, companies: int = 250, noise: int = 400
) -> Corpus:
    """The encyclopedia of ``seed`` (same seed, same passages and questions) with ~3,500 passages."""
    rng = random.Random(seed)
    taken: set[str] = set()
    city_names = [_name(rng, 2, taken) for _ in range(cities)]
    rivers = [_name(rng, 2, taken) for _ in range(cities // 3)]
    firsts = [_name(rng, 2, taken) for _ in range(people // 3)]
    lasts = [_name(rng, 3, taken) for _ in range(people // 2)]
    full: set[str] = set()
    persons = []
    while len(persons) < people:  # shared first and last names: near-miss distractors for every search
        name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
        if name in full:
            continue
        full.add(name)
        persons.append(
            {
                "name": name,
                "year": str(rng.randint(1650, 1950)),
                "city": rng.choice(city_names),
                "occupation": rng.choice(OCCUPATIONS),
            }
        )
    city_info = {
        c: {
            "name": c,
            "river": rng.choice(rivers),
            "country": rng.choice(COUNTRIES),
            "year": str(rng.randint(900, 1700)),
        }
        for c in city_names
    }
    firms = []
    for _ in range(companies):
        base = _name(rng, 2, taken)
        firms.append(
            {
                "name": f"{base} {rng.choice(['Works', 'Guild', 'Company', 'Foundry'])}",
                "founder": rng.choice(persons)["name"],
                "city": rng.choice(city_names),
                "industry": rng.choice(INDUSTRIES),
            }
        )
    texts: list[tuple[str, str]] = []
    for p in persons:
        for templates in PERSON_FACTS.values():
            texts.append((p["name"], rng.choice(templates).format(**p)))
    for c in city_info.values():
        for templates in CITY_FACTS.values():
            texts.append((c["name"], rng.choice(templates).format(**c)))
    for f in firms:
        for templates in COMPANY_FACTS.values():
            texts.append((f["name"], rng.choice(templates).format(**f)))
    for _ in range(noise):  # passages full of names and no answer
        a, b = rng.sample(persons, 2)
        texts.append(
            ("Letters", f"{a['name']} once wrote to {b['name']} about {rng.choice(INDUSTRIES)} in {a['city']}.")
        )
    rng.shuffle(texts)
    passages = [Passage(i, t, x) for i, (t, x) in enumerate(texts)]
    qa: list[dict[str, Any]] = []

    def add(qid: str, question: str, answer: str, hops: int) -> None:
        qa.append({"id": qid, "question": question, "answer": answer, "hops": hops, "split": split_of(qid)})

    by_name = {p["name"]: p for p in persons}
    for i, p in enumerate(persons):
        add(f"p{i}-born", f"In which year was {p['name']} born?", p["year"], 1)
        add(f"p{i}-city", f"In which city was {p['name']} born?", p["city"], 1)
        add(
            f"p{i}-river",
            f"Which river flows through the city where {p['name']} was born?",
            city_info[p["city"]]["river"],
            2,
        )
    for i, f in enumerate(firms):
        add(f"c{i}-founder", f"Who founded {f['name']}?", f["founder"], 1)
        add(
            f"c{i}-founder-born",
            f"In which year was the founder of {f['name']} born?",
            by_name[f["founder"]]["year"],
            2,
        )
        add(f"c{i}-hq-founded", f"In which year was the city where {f['name']} has its headquarters founded?",
            city_info[f["city"]]["year"], 2)  # fmt: skip
    return Corpus(seed, passages, qa)
