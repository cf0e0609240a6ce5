"""Inline-SVG charts of the benchmark page: lines over a linear or log2 x axis, and stacked bars.

Every mark carries its figure in ``data-*`` attributes (``data-x``/``data-y`` on points,
``data-value`` on bar segments and reference lines), so a test can check in a real browser that
what is drawn is the number it stands for. Text from nodes is escaped here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from clusterforge.reports.svg import PALETTE, Scale, fmt_num, nice_ticks

W, H = 560, 300
L, R, T, B = 70, 16, 30, 70


@dataclass(frozen=True)
class Line:
    name: str
    points: list[tuple[float, float]]
    dashed: bool = False


@dataclass(frozen=True)
class Stack:
    label: str  # the bar's x label, e.g. "2 nodes"
    parts: list[tuple[str, float]]  # (part name, value), bottom first


def _open(title: str, kind: str, attrs: str, height: int = H) -> list[str]:
    t = escape(title)
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {kind}" width="{W}" height="{height}" '
        f'viewBox="0 0 {W} {height}" role="img" aria-label="{t}" {attrs}>',
        f"<title>{t}</title>",
        f'<text x="{W / 2:.1f}" y="18" text-anchor="middle" class="chart-title">{t}</text>',
    ]


def _y_axis(y: Scale, unit: str) -> list[str]:
    out = []
    for tick in nice_ticks(y.lo, y.hi):
        py = y(tick)
        out.append(
            f'<line class="grid" x1="{L}" x2="{W - R}" y1="{py:.2f}" y2="{py:.2f}" stroke="#e5e5e5"/>'
            f'<text x="{L - 6}" y="{py + 4:.2f}" text-anchor="end" class="tick">{fmt_num(tick)}</text>'
        )
    mid = (T + H - B) / 2
    out.append(
        f'<text transform="translate(14 {mid:.1f}) rotate(-90)" text-anchor="middle" class="axis-label">{escape(unit)}</text>'
    )
    return out


def _axes(x_label: str) -> list[str]:
    return [
        f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="#333"/>',
        f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="#333"/>',
        f'<text x="{(L + W - R) / 2:.1f}" y="{H - B + 34}" text-anchor="middle" class="axis-label">{escape(x_label)}</text>',
    ]


def _legend(names: list[str], y0: int, colors: dict[str, str]) -> tuple[list[str], int]:
    """Legend entries wrapped at the chart's width; and the height the chart needs to show them."""
    out, x, y = [], float(L), float(y0)
    for name in names:
        width = 24 + 7 * len(name)
        if x + width > W - R and x > L:
            x, y = float(L), y + 14
        out.append(
            f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colors[name]}"/>'
            f'<text x="{x + 14:.1f}" y="{y:.1f}" class="legend">{escape(name)}</text>'
        )
        x += width
    return out, max(H, int(y) + 8)


def _top(values: list[float]) -> float:
    top = max([v for v in values if v > 0] or [1.0])
    return nice_ticks(0.0, top * 1.05)[-1]


def line_chart(title: str, lines: list[Line], *, x_label: str, y_unit: str, x_log2: bool = False,
               x_ticks: list[float] | None = None) -> str:  # fmt: skip
    xs = [x for ln in lines for x, _ in ln.points if not x_log2 or x > 0]
    ys = [y for ln in lines for _, y in ln.points]
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if lo == hi:
        lo, hi = (lo / 2, hi * 2) if x_log2 and lo > 0 else (lo - 1, hi + 1)
    x = Scale(lo, hi, L + 16, W - R - 16, log2=x_log2)
    y = Scale(0.0, _top(ys), H - B, T)
    colors = {ln.name: PALETTE[i % len(PALETTE)] for i, ln in enumerate(lines)}
    n_points = sum(len(ln.points) for ln in lines)
    out = _y_axis(y, y_unit)
    if x_ticks is None:
        x_ticks = (
            sorted({p for p, _ in (pt for ln in lines for pt in ln.points)})
            if len(xs) <= 12
            else nice_ticks(lo, hi)
        )
    for tick in x_ticks:
        if (x_log2 and tick <= 0) or tick < lo or tick > hi:
            continue
        out.append(
            f'<text x="{x(tick):.2f}" y="{H - B + 16}" text-anchor="middle" class="tick">{fmt_num(tick)}</text>'
        )
    for ln in lines:
        pts = sorted(p for p in ln.points if not x_log2 or p[0] > 0)
        color = colors[ln.name]
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        coords = " ".join(f"{x(px):.2f},{y(py):.2f}" for px, py in pts)
        out.append(
            f'<g class="series" data-series="{escape(ln.name)}"><polyline fill="none" stroke="{color}" '
            f'stroke-width="2"{dash} points="{coords}"/>'
        )
        if len(pts) <= 60:  # markers for few points; a long time series is its line
            for px, py in pts:
                out.append(
                    f'<circle class="point" data-x="{px!r}" data-y="{py!r}" cx="{x(px):.2f}" cy="{y(py):.2f}" r="3.5" '
                    f'fill="{color}"><title>{escape(ln.name)}: {fmt_num(py)} {escape(y_unit)} at {fmt_num(px)}</title></circle>'
                )
        out.append("</g>")
    out += _axes(x_label)
    legend, height = _legend([ln.name for ln in lines], H - 14, colors)
    return "\n".join(
        [*_open(title, "line-chart", f'data-points="{n_points}"', height), *out, *legend, "</svg>"]
    )


def stacked_bars(title: str, stacks: list[Stack], *, y_unit: str, colors: dict[str, str]) -> str:
    totals = [sum(v for _, v in s.parts) for s in stacks]
    y = Scale(0.0, _top(totals), H - B, T)
    span = (W - L - R) / max(len(stacks), 1)
    width = min(70.0, span * 0.6)
    out = _y_axis(y, y_unit)
    names: list[str] = []
    for i, s in enumerate(stacks):
        x0 = L + i * span + (span - width) / 2
        base = 0.0
        out.append(
            f'<g class="stack" data-label="{escape(s.label)}" data-total="{sum(v for _, v in s.parts)!r}">'
        )
        for name, value in s.parts:
            if name not in names:
                names.append(name)
            top = base + max(value, 0.0)
            out.append(
                f'<rect class="segment" data-part="{escape(name)}" data-value="{value!r}" x="{x0:.2f}" '
                f'y="{y(top):.2f}" width="{width:.2f}" height="{max(y(base) - y(top), 0.0):.2f}" '
                f'fill="{colors.get(name, "#999")}"><title>{escape(s.label)} {escape(name)}: {fmt_num(value)} '
                f"{escape(y_unit)}</title></rect>"
            )
            base = top
        out.append(
            f'</g><text x="{x0 + width / 2:.2f}" y="{H - B + 16}" text-anchor="middle" class="tick">{escape(s.label)}</text>'
        )
    out += _axes("")
    legend, height = _legend(names, H - 32, colors)
    return "\n".join(
        [*_open(title, "stacked-bars", f'data-bars="{len(stacks)}"', height), *out, *legend, "</svg>"]
    )


def log2_ticks(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [2.0**e for e in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
