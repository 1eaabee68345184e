"""Tables of the command line that fit the terminal without cutting what users copy.

A column is an *id* (message ids, transaction ids, names: printed whole, never cut), a
*value* (short numbers and states, printed whole) or *text* (reasons, previews,
descriptions: one line each, cut with an ellipsis to the room left). When even the ids and
values do not fit, the columns marked ``optional`` are left out, last first; ids still too
wide for the terminal fold onto the next line rather than lose characters. :func:`fitted`
says what was cut or left out, so the command can point to ``--json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich.cells import cell_len
from rich.table import Column, Table
from rich.text import Text

__all__ = ["Field", "Fitted", "fitted"]

TEXT_MIN_WIDTH = 8
"""A text column is never narrower than this (or its longest cell, if shorter)."""


@dataclass(frozen=True)
class Field:
    """One column of a table."""

    header: str
    kind: Literal["id", "value", "text"] = "value"
    optional: bool = False
    """Left out (with a note) when the ids and values would not fit otherwise."""


@dataclass
class Fitted:
    """A table fitted to a width, and what did not fit."""

    table: Table
    hidden: list[str] = field(default_factory=list)
    """Headers of the optional columns left out."""
    cut: list[str] = field(default_factory=list)
    """Headers of the text columns whose cells were cut."""

    def note(self) -> str | None:
        """A one-line hint for stderr, or None when everything is shown whole."""
        parts = []
        if self.hidden:
            parts.append(f"not shown: {', '.join(self.hidden)}")
        if self.cut:
            parts.append(f"cut to fit: {', '.join(self.cut)}")
        return f"{'; '.join(parts)} (--json prints every field whole)" if parts else None


def _overhead(columns: int) -> int:
    """Borders and padding of a rich table with edges: ``│ a │ b │``."""
    return 3 * columns + 1


def fitted(fields: Sequence[Field], rows: Sequence[Sequence[str]], width: int) -> Fitted:
    """A table of ``rows`` (plain strings, one per field) fitted to ``width`` columns; the
    whitespace of text cells (newlines too) is collapsed to single spaces."""
    rows = [
        [
            " ".join(cell.split()) if f.kind == "text" else cell
            for f, cell in zip(fields, row, strict=True)
        ]
        for row in rows
    ]
    natural = [
        max([cell_len(f.header), *(cell_len(row[i]) for row in rows)]) for i, f in enumerate(fields)
    ]
    shown = list(range(len(fields)))

    def needed(columns: list[int]) -> int:
        fixed = sum(natural[i] for i in columns if fields[i].kind != "text")
        text = sum(min(natural[i], TEXT_MIN_WIDTH) for i in columns if fields[i].kind == "text")
        return fixed + text + _overhead(len(columns))

    hidden: list[str] = []
    while needed(shown) > width:
        optional = [i for i in shown if fields[i].optional]
        if not optional:
            break
        shown.remove(optional[-1])
        hidden.insert(0, fields[optional[-1]].header)
    text_columns = [i for i in shown if fields[i].kind == "text"]
    room = width - _overhead(len(shown))
    room -= sum(natural[i] for i in shown if fields[i].kind != "text")
    widths = _share(room, {i: natural[i] for i in text_columns})
    excess = needed(shown) - width
    for i in reversed([i for i in shown if fields[i].kind == "id"]):
        if excess <= 0:
            break
        widths[i] = max(natural[i] - excess, TEXT_MIN_WIDTH)  # the later ids fold first
        excess -= natural[i] - widths[i]
    table = Table(
        *(
            Column(
                fields[i].header,
                no_wrap=fields[i].kind != "id",  # an id folds, never loses characters
                overflow="ellipsis" if fields[i].kind == "text" else "fold",
                width=widths.get(i),
            )
            for i in shown
        )
    )
    for row in rows:
        table.add_row(*(Text(row[i]) for i in shown))  # plain text: no markup in cells
    cut = [fields[i].header for i in text_columns if widths[i] < natural[i]]
    return Fitted(table, hidden, cut)


def _share(room: int, natural: dict[int, int]) -> dict[int, int]:
    """Widths for the text columns: the narrow ones whole, the rest share what is left."""
    widths: dict[int, int] = {}
    left = dict(natural)
    while left:
        fair = max(room // len(left), 0)
        narrow = {i: w for i, w in left.items() if w <= fair}
        if not narrow:
            for i, w in left.items():
                widths[i] = max(fair, min(w, TEXT_MIN_WIDTH))
            break
        for i, w in narrow.items():
            widths[i] = w
            room -= w
            del left[i]
    return widths
