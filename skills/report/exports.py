"""report: write results as a Markdown file and a self-contained HTML file.

A :class:`Report` collects blocks (headings, Markdown text, tables from DataFrames, images, key
figures) and ``save()`` writes ``<name>.md`` (images copied next to it, linked relatively) and
``<name>.html`` (images embedded as data URIs, styles inlined: one file to send around). Markdown text
is rendered to HTML with markdown-it (a dependency of rich), with raw HTML disabled.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import shutil
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd

__all__ = ["Report", "df_to_markdown", "write_report"]

_ASSETS = Path(__file__).resolve().parent / "assets"
_IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
}


def _fmt(value: Any, digits: int) -> str:
    """A cell as text: thousands separators for big numbers, significant digits for small ones."""
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
        return f"{int(value):,}"
    if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f"):
        v = float(value)
        return f"{v:,.{digits}f}" if abs(v) >= 1 or v == 0 else f"{v:.{digits}g}"
    if isinstance(value, pd.Timestamp) and value == value.normalize():
        return value.date().isoformat()
    return str(value)


def _cells(df: pd.DataFrame | pd.Series, max_rows: int, digits: int) -> tuple[list[str], list[list[str]], str]:
    """Header, formatted rows and a note when rows were cut; a meaningful index becomes columns."""
    frame = df.to_frame() if isinstance(df, pd.Series) else df
    if not isinstance(frame.index, pd.RangeIndex):
        frame = frame.reset_index()
    if isinstance(frame.columns, pd.MultiIndex):
        frame.columns = [" ".join(str(p) for p in c if str(p)) for c in frame.columns]
    note = f"showing {max_rows} of {len(frame):,} rows" if len(frame) > max_rows else ""
    shown = frame.head(max_rows)
    header = [str(c) for c in shown.columns]
    rows = [[_fmt(v, digits) for v in row] for row in shown.itertuples(index=False, name=None)]
    return header, rows, note


def df_to_markdown(df: pd.DataFrame | pd.Series, max_rows: int = 50, digits: int = 2) -> str:
    """A DataFrame as a Markdown pipe table (at most ``max_rows`` rows; a non-default index is kept).

    >>> print(df_to_markdown(pd.DataFrame({"a": [1, 2], "b": [0.5, 1234.5]})))
    | a | b |
    |---|---|
    | 1 | 0.5 |
    | 2 | 1,234.50 |
    """
    header, rows, note = _cells(df, max_rows, digits)

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    if note:
        lines.append(f"\n*{note}*")
    return "\n".join(lines)


def _html_table(df: pd.DataFrame | pd.Series, max_rows: int, digits: int, caption: str | None) -> str:
    header, rows, note = _cells(df, max_rows, digits)
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead>")
    out.append("<tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    if note:
        out.append(f'<p class="note">{html.escape(note)}</p>')
    return "\n".join(out)


def _markdown_to_html(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


class Report:
    """A report under construction; ``save()`` writes it as Markdown and HTML.

    Example (``summary`` a DataFrame, the PNG a chart)::

        r = Report("Sales 2024")
        r.text("Revenue grew **12%**.").table(summary, caption="By region").image("plots/bar.png")
        r.save("out")  # {'markdown': '.../out/report.md', 'html': '.../out/report.html'}
    """

    def __init__(self, title: str, subtitle: str | None = None) -> None:
        self.title = title
        self.subtitle = subtitle
        self.blocks: list[tuple[str, Any]] = []

    def __repr__(self) -> str:
        kinds = ", ".join(k for k, _ in self.blocks) or "empty"
        return f"Report({self.title!r}: {len(self.blocks)} blocks: {kinds})"

    def heading(self, text: str, level: int = 2) -> Report:
        self.blocks.append(("heading", (text, max(1, min(int(level), 6)))))
        return self

    def text(self, markdown: str) -> Report:
        """A paragraph (or more) of Markdown."""
        self.blocks.append(("text", markdown))
        return self

    def table(
        self, df: pd.DataFrame | pd.Series, caption: str | None = None, max_rows: int = 50, digits: int = 2
    ) -> Report:
        """A table from a DataFrame or Series (at most ``max_rows`` rows, numbers rounded to ``digits``)."""
        if not isinstance(df, pd.DataFrame | pd.Series):
            raise TypeError(f"table() takes a DataFrame or Series; got {type(df).__name__}")
        self.blocks.append(("table", (df, caption, max_rows, digits)))
        return self

    def metrics(self, values: dict, caption: str | None = None, digits: int = 2) -> Report:
        """Key figures as a two-column table, e.g. ``{"rows": 1200, "revenue": 3.4e6}``."""
        frame = pd.DataFrame({"metric": list(values), "value": [_fmt(v, digits) for v in values.values()]})
        self.blocks.append(("table", (frame, caption, len(frame), digits)))
        return self

    def image(self, path: str, caption: str | None = None) -> Report:
        """An image file (PNG, JPEG, GIF or SVG), e.g. a chart from the dataframe-analysis skill."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no image file at {path.resolve()}")
        if path.suffix.lower() not in _IMAGE_TYPES:
            raise ValueError(f"unsupported image type {path.suffix!r}; use one of {sorted(_IMAGE_TYPES)}")
        self.blocks.append(("image", (path.resolve(), caption)))
        return self

    def to_markdown(self, image_dir: str = "images") -> str:
        """The report as Markdown; images are referenced as ``image_dir/<file name>``."""
        parts = [f"# {self.title}"]
        if self.subtitle:
            parts.append(f"*{self.subtitle}*")
        for kind, data in self.blocks:
            if kind == "heading":
                parts.append("#" * data[1] + " " + data[0])
            elif kind == "text":
                parts.append(data.strip())
            elif kind == "table":
                df, caption, max_rows, digits = data
                parts.append((f"**{caption}**\n\n" if caption else "") + df_to_markdown(df, max_rows, digits))
            elif kind == "image":
                path, caption = data
                parts.append(f"![{caption or path.stem}]({image_dir}/{path.name})")
                if caption:
                    parts.append(f"*{caption}*")
        return "\n\n".join(parts) + "\n"

    def to_html(self) -> str:
        """The report as one self-contained HTML page (images embedded, styles inlined)."""
        body = []
        for kind, data in self.blocks:
            if kind == "heading":
                body.append(f"<h{data[1]}>{html.escape(data[0])}</h{data[1]}>")
            elif kind == "text":
                body.append(_markdown_to_html(data))
            elif kind == "table":
                df, caption, max_rows, digits = data
                body.append(_html_table(df, max_rows, digits, caption))
            elif kind == "image":
                path, caption = data
                b64 = base64.b64encode(path.read_bytes()).decode("ascii")
                mime = _IMAGE_TYPES[path.suffix.lower()]
                alt = html.escape(caption or path.stem)
                cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
                body.append(f'<figure><img src="data:{mime};base64,{b64}" alt="{alt}">{cap}</figure>')
        subtitle = f'<p class="subtitle">{html.escape(self.subtitle)}</p>' if self.subtitle else ""
        template = Template((_ASSETS / "template.html").read_text(encoding="utf-8"))
        return template.substitute(
            title=html.escape(self.title),
            subtitle=subtitle,
            css=(_ASSETS / "report.css").read_text(encoding="utf-8"),
            body="\n".join(body),
            generated=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        )

    def save(self, directory: str = "report", name: str = "report") -> dict[str, str]:
        """Write ``<directory>/<name>.md`` (+ ``images/``) and ``<directory>/<name>.html``; returns their paths."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        images = [data[0] for kind, data in self.blocks if kind == "image"]
        if images:
            (out / "images").mkdir(exist_ok=True)
            for path in images:
                if path != (out / "images" / path.name).resolve():
                    shutil.copyfile(path, out / "images" / path.name)
        md, page = out / f"{name}.md", out / f"{name}.html"
        md.write_text(self.to_markdown("images"), encoding="utf-8")
        page.write_text(self.to_html(), encoding="utf-8")
        return {"markdown": str(md.resolve()), "html": str(page.resolve())}


_IMAGE_SUFFIXES = tuple(_IMAGE_TYPES)


def write_report(title: str, items: list, directory: str = "report", name: str = "report") -> dict[str, str]:
    """One call for a whole report. Each item is Markdown text, a DataFrame/Series (a table), an image
    path (a ``Path``, or a string naming an existing image file), a ``{metric: value}`` dict, or a
    ``(caption, table_or_image)`` pair. Returns the paths written.
    """
    report = Report(title)
    for item in items:
        caption = None
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            caption, item = item
        if isinstance(item, pd.DataFrame | pd.Series):
            report.table(item, caption=caption)
        elif isinstance(item, Mapping):
            report.metrics(item, caption=caption)
        elif isinstance(item, Path) or (
            isinstance(item, str) and item.lower().endswith(_IMAGE_SUFFIXES) and Path(item).is_file()
        ):
            report.image(item, caption=caption)
        elif isinstance(item, str):
            report.text(item)
        else:
            raise TypeError(f"cannot put a {type(item).__name__} in a report; give text, a DataFrame or an image path")
    return report.save(directory, name)
