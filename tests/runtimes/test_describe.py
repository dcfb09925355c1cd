"""Bounded previews for describe(), on real pandas / numpy / pydantic / SQLAlchemy objects."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pydantic
import sqlalchemy as sa
from cave.runtimes.describe import MAX_PREVIEW, describe_namespace, kind_of, preview, type_name


class Order(pydantic.BaseModel):
    """An order."""

    id: int
    item: str
    qty: int = 1


@dataclasses.dataclass
class Box:
    w: float
    h: float


def test_dataframe_preview_has_shape_dtypes_and_columns():
    df = pd.DataFrame({"a": [1, 2], "b": [1.5, 2.5], "c": ["x", "y"]}).set_index("c")
    text = preview(df)
    assert text.startswith("2 rows x 2 columns; a: int64, b: float64")
    assert "index Index 'c'" in text


def test_wide_and_huge_objects_stay_bounded():
    wide = pd.DataFrame(np.zeros((2, 1000)), columns=[f"column_{i}" for i in range(1000)])
    for obj in (wide, list(range(10**6)), "x" * 10**6, {str(i): i for i in range(10**5)}, np.zeros((1000, 1000))):
        text = preview(obj)
        assert len(text) <= MAX_PREVIEW, type(obj)
    assert "(+" in preview(wide)  # says how many more columns there are


def test_containers_and_scalars():
    assert preview([1, "a", 2.0]) == "list len 3 of int|str|float"
    assert preview((1, 2)) == "tuple len 2 of int"
    assert preview(set()) == "set len 0 of nothing"
    assert preview({"k": [1]}) == "dict len 1 of str -> list; keys: 'k'"
    assert preview(3.5) == "3.5"
    assert preview("hello") == "str len 5: 'hello'"
    assert preview(np.arange(3)) == "array shape (3,) dtype int64: [0, 1, 2]"
    assert preview(pd.Series([1.0], name="price")) == "Series len 1, dtype float64, name 'price'"


def test_models_dataclasses_and_callables():
    assert preview(Order) == "class Order — pydantic model fields: id: int, item: str, qty: int"
    assert preview(Order(id=1, item="pen")) == "Order(id=1, item='pen', qty=1)"
    assert preview(Box) == "class Box — dataclass fields: w: float, h: float"
    assert preview(Box(1, 2)) == "Box(w=1, h=2)"
    assert preview(len).startswith("len(obj, /)")
    assert kind_of(len) == "function" and kind_of(Order) == "type" and kind_of(np) == "module"
    assert type_name(pd.DataFrame()) == "pandas.DataFrame" and type_name(Box(1, 2)).endswith("Box")


def test_sqlalchemy_engine_shows_dialect_and_tables(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    with engine.begin() as conn:
        conn.execute(sa.text("create table orders (id integer primary key, total real)"))
        conn.execute(sa.text("create table customers (id integer primary key)"))
    text = preview(engine)
    assert text.startswith("sqlite engine")
    assert "tables: customers, orders" in text
    engine.dispose()


def test_a_broken_object_never_breaks_describe():
    class Nasty:
        def __repr__(self):
            raise RuntimeError("no")

        def __len__(self):
            raise RuntimeError("no")

    assert preview(Nasty()).startswith("<Nasty instance")  # reprlib's fallback, no exception
    infos = describe_namespace({"n": Nasty(), "_hidden": 1, "ok": 2, "skip": 3}, hidden={"skip"})
    assert [i.name for i in infos] == ["n", "ok"]
