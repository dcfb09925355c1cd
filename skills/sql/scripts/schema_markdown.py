"""Print a database's schema as Markdown: python schema_markdown.py DATABASE_URL.

Reads through the sql skill's read-only connection; nothing is written.
"""

import importlib.util
import sys
from pathlib import Path


def _exports():
    path = Path(__file__).resolve().parents[1] / "exports.py"
    spec = importlib.util.spec_from_file_location("sql_skill_exports", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: schema_markdown.py DATABASE_URL (e.g. sqlite:///shop.db)")
    sql = _exports()
    url = sys.argv[1]
    print(f"# Schema of `{url}`\n")
    for table in sql.list_tables(url):
        n = int(sql.query(url, f'SELECT COUNT(*) AS n FROM "{table}"')["n"].iloc[0])
        print(f"## {table} ({n} rows)\n")
        print("| column | type | key | references |")
        print("|---|---|---|---|")
        for row in sql.describe_table(url, table).itertuples():
            ref = row.references if isinstance(row.references, str) else ""
            print(f"| {row.column} | {row.type} | {'PK' if row.primary_key else ''} | {ref} |")
        print()


if __name__ == "__main__":
    main()
