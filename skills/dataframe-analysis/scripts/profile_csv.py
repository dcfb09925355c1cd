"""Profile a CSV file and print the result: python profile_csv.py FILE.csv [--sep ,] [--comment '#']."""

import argparse
import importlib.util
import sys
from pathlib import Path

import pandas as pd


def _exports():
    """The skill's exports module, loaded from the folder next to this script."""
    path = Path(__file__).resolve().parents[1] / "exports.py"
    spec = importlib.util.spec_from_file_location("dataframe_analysis_exports", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file")
    parser.add_argument("--sep", default=",")
    parser.add_argument("--comment", default=None, help="lines starting with this character are skipped")
    args = parser.parse_args()
    df = pd.read_csv(args.file, sep=args.sep, comment=args.comment)
    print(_exports().profile(df))


if __name__ == "__main__":
    main()
