"""The data profile the model reads first: bounded, and it shows the traps an analyst looks for."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cave.review.profile import LIMIT, profile


def test_profile_shows_spellings_text_numbers_dates_and_duplicates():
    df = pd.DataFrame(
        {
            "borough": ["Brooklyn", " brooklyn", "BROOKLYN", "Queens", "queens", "Bronx"] * 5,
            "fare": ["$1,200.50", "30", "7.25", "8", "12", "9"] * 5,
            "day": ["2024-01-05", "05/01/2024", "2024-01-07", "2024-01-08", "2024-01-09", "2024-01-10"] * 5,
            "amount": np.arange(30, dtype=float),
        }
    )
    df.loc[3, "amount"] = np.nan
    text = profile(pd.concat([df, df.head(2)], ignore_index=True))
    assert "32 rows x 4 columns; 2 exact duplicate rows" in text
    assert "written several ways: 'Brooklyn'/' brooklyn'/'BROOKLYN' (17 rows)" in text
    assert "fare: text, 6 distinct; numbers stored as text" in text and "'$1,200.50'" in text
    assert "dates stored as text" in text and "2 formats" in text
    assert "amount: float64, 1 missing, 0 .. 29" in text


def test_profile_is_bounded_for_wide_tables():
    rng = np.random.default_rng(0)
    wide = pd.DataFrame({f"col_{i}": rng.choice(["alpha", "beta", "Gamma", "gamma "], 200) for i in range(20)})
    wide["id"] = [f"id-{i}" for i in range(200)]
    text = profile(wide)
    assert len(text) <= LIMIT and text.count("\n- ") >= 20  # every column keeps its line
    assert len(profile(wide, limit=600)) <= 600
