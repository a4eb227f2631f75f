"""Bar charts as inline SVG, drawn on the server: no script, readable as markup.

Each bar is a `rect.bar` carrying its figures as data attributes (the markup contract), with
a `<title>` a browser shows on hover and a screen reader reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from markupsafe import Markup, escape

WIDTH, HEIGHT, MARGIN = 720, 160, 24


class Bar(NamedTuple):
    """One bar: its height's value, its class, its label and its data attributes."""

    value: float
    css: str  # "accepted", "paid", "p50", "p99"
    label: str  # shown on hover
    data: dict[str, str]


def bar_chart(chart_id: str, title: str, slots: Sequence[Sequence[Bar]], unit: str) -> Markup:
    """An SVG with one slot per element of `slots`, the bars of a slot side by side, scaled to
    the tallest; the largest value is written on the axis in `unit`."""
    top = max((bar.value for slot in slots for bar in slot), default=0.0)
    scale = (HEIGHT - 2 * MARGIN) / top if top > 0 else 0.0
    slot_width = (WIDTH - 2 * MARGIN) / max(len(slots), 1)
    parts = [
        f'<svg id="{escape(chart_id)}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" '
        f'y2="{HEIGHT - MARGIN}" class="axis"/>',
        f'<text x="{MARGIN}" y="{MARGIN - 8}" class="scale">max {_figure(top)} {escape(unit)}'
        "</text>",
    ]
    for n, slot in enumerate(slots):
        width = slot_width / max(len(slot), 1)
        for k, bar in enumerate(slot):
            height = bar.value * scale
            x = MARGIN + n * slot_width + k * width
            data = "".join(f' data-{escape(key)}="{escape(v)}"' for key, v in bar.data.items())
            parts.append(
                f'<rect class="bar {escape(bar.css)}" x="{x:.1f}"'
                f' y="{HEIGHT - MARGIN - height:.1f}" width="{max(width - 1, 0.5):.1f}"'
                f' height="{height:.1f}"{data}>'
                f"<title>{escape(bar.label)}</title></rect>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))  # every value interpolated above is escaped


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:,.2f}"
