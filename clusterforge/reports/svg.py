"""Small inline-SVG charts for the run report: a line chart (log2 or linear x) and grouped bars.

No plotting library: the report must be one self-contained file a person can open anywhere.
Every mark carries its value in a ``data-*`` attribute so tests (and people reading the
source) can check that what is drawn matches the number it stands for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

WIDTH, HEIGHT = 640, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 64, 16, 28, 64
LEGEND_ROW = 14
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
BAR_COLORS = {"below limit": "#d62728"}  # a finding stands out whatever its position
LINE_STYLES = {
    "threshold": ("#d62728", "6 4"),  # the pass/fail limit: red dashed
    "median": ("#333333", "2 3"),  # a reference value: grey dotted
    "limit": ("#e6a000", "6 4"),  # a derived limit (e.g. median minus the allowed gap)
}


@dataclass(frozen=True)
class HLine:
    value: float
    label: str
    kind: str = "threshold"  # a key of LINE_STYLES


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[float, float]]


@dataclass(frozen=True)
class Bar:
    name: str
    value: float
    marks: list[HLine] = field(default_factory=list)  # short lines across this bar only


@dataclass(frozen=True)
class BarGroup:
    label: str
    bars: list[Bar]


class Scale:
    """Maps a data interval to a pixel interval, linearly or in log2."""

    def __init__(self, lo: float, hi: float, px_lo: float, px_hi: float, log2: bool = False) -> None:
        self.log2 = log2
        self.lo, self.hi = (math.log2(lo), math.log2(hi)) if log2 else (lo, hi)
        if self.hi == self.lo:
            self.hi = self.lo + 1.0
        self.px_lo, self.px_hi = px_lo, px_hi

    def __call__(self, value: float) -> float:
        v = math.log2(value) if self.log2 else value
        return self.px_lo + (v - self.lo) / (self.hi - self.lo) * (self.px_hi - self.px_lo)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def fmt_num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.4g}"
    return f"{value:.3g}"


def fmt_bytes(value: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B"


def _y_domain(values: list[float]) -> tuple[float, float]:
    top = max([v for v in values if v is not None and v > 0] or [1.0])
    ticks = nice_ticks(0.0, top * 1.05)
    return 0.0, ticks[-1]


def _frame(
    title: str, kind: str, attrs: str, y: Scale, y_unit: str, body: list[str], legend: list[str]
) -> str:
    t = escape(title)
    rows = len(legend)
    height = HEIGHT + LEGEND_ROW * max(rows - 1, 0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {kind}" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{t}" {attrs}>',
        f"<title>{t}</title>",
        f'<text x="{WIDTH / 2:.1f}" y="16" text-anchor="middle" class="chart-title">{t}</text>',
    ]
    for tick in nice_ticks(y.lo, y.hi):
        py = y(tick)
        out.append(
            f'<line class="grid" data-value="{tick!r}" x1="{MARGIN_L}" x2="{WIDTH - MARGIN_R}" y1="{py:.2f}" y2="{py:.2f}" '
            f'stroke="#e5e5e5"/><text x="{MARGIN_L - 6}" y="{py + 4:.2f}" text-anchor="end" '
            f'class="tick">{fmt_num(tick)}</text>'
        )
    mid = (MARGIN_T + HEIGHT - MARGIN_B) / 2
    out.append(
        f'<text transform="translate(14 {mid:.1f}) rotate(-90)" text-anchor="middle" class="axis-label">'
        f"{escape(y_unit)}</text>"
    )
    out.extend(body)
    for r, row in enumerate(legend):
        out.append(
            row.replace("{Y}", f"{HEIGHT - 8 + r * LEGEND_ROW:.1f}").replace(
                "{YR}", f"{HEIGHT - 17 + r * LEGEND_ROW:.1f}"
            )
        )
    out.append(
        f'<line x1="{MARGIN_L}" x2="{MARGIN_L}" y1="{MARGIN_T}" y2="{HEIGHT - MARGIN_B}" stroke="#333"/>'
        f'<line x1="{MARGIN_L}" x2="{WIDTH - MARGIN_R}" y1="{HEIGHT - MARGIN_B}" y2="{HEIGHT - MARGIN_B}" '
        f'stroke="#333"/></svg>'
    )
    return "\n".join(out)


def _hline(line: HLine, x1: float, x2: float, y: Scale, label: bool = True, left: bool = False) -> str:
    color, dash = LINE_STYLES.get(line.kind, LINE_STYLES["threshold"])
    py = y(line.value)
    tx, anchor = (x1 + 2, "start") if left else (x2 - 2, "end")
    text = (
        f'<text x="{tx:.2f}" y="{py - 3:.2f}" text-anchor="{anchor}" class="hline-label" fill="{color}" '
        f'stroke="#fff" stroke-width="3" paint-order="stroke">'
        f"{escape(line.label)} {fmt_num(line.value)}</text>"
        if label
        else ""
    )
    return (
        f'<line class="hline {escape(line.kind)}" data-value="{line.value!r}" x1="{x1:.2f}" x2="{x2:.2f}" '
        f'y1="{py:.2f}" y2="{py:.2f}" stroke="{color}" stroke-dasharray="{dash}" stroke-width="1.5">'
        f"<title>{escape(line.label)}: {fmt_num(line.value)}</title></line>{text}"
    )


def _hlines(lines: list[HLine], y: Scale) -> list[str]:
    """Lines across the plot; a label that would overprint the one before goes to the other side."""
    out, last_right, last_left = [], -1e9, -1e9
    for line in sorted(lines, key=lambda h: -y(h.value)):
        py = y(line.value)
        left = abs(py - last_right) < 12 and abs(py - last_left) >= 12
        out.append(_hline(line, MARGIN_L, WIDTH - MARGIN_R, y, left=left))
        if left:
            last_left = py
        else:
            last_right = py
    return out


def _legend(names: list[str]) -> list[str]:
    """Legend rows (one string each, y left as {Y}/{YR} for the frame); wraps at the chart's width."""
    rows: list[str] = []
    row, x = "", float(MARGIN_L)
    for i, name in enumerate(names):
        width = 24 + 7 * len(name)
        if row and x + width > WIDTH - MARGIN_R:
            rows.append(row)
            row, x = "", float(MARGIN_L)
        color = BAR_COLORS.get(name) or PALETTE[i % len(PALETTE)]
        row += (
            f'<rect x="{x:.1f}" y="{{YR}}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 14:.1f}" y="{{Y}}" class="legend">{escape(name)}</text>'
        )
        x += width
    return rows + ([row] if row else [])


def line_chart(
    title: str,
    series: list[Series],
    hlines: list[HLine],
    *,
    x_unit: str = "B",
    y_unit: str = "",
    x_log2: bool = True,
) -> str:
    """Points joined per series; x in log2 (message sizes) or linear; horizontal lines across."""
    xs = [x for s in series for x, _ in s.points if not x_log2 or x > 0]
    ys = [v for s in series for _, v in s.points] + [h.value for h in hlines]
    lo, hi = (min(xs), max(xs)) if xs else (1.0, 2.0)
    if x_log2 and lo == hi:
        lo, hi = lo / 2, hi * 2  # one size: centre it
    x = Scale(lo, hi, MARGIN_L + 20, WIDTH - MARGIN_R - 20, log2=x_log2)
    y = Scale(*_y_domain(ys), HEIGHT - MARGIN_B, MARGIN_T)
    body: list[str] = []
    x_ticks = (
        [2.0**e for e in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)]
        if x_log2
        else nice_ticks(lo, hi)
    )
    stride = max(1, math.ceil(len(x_ticks) / 8))
    for tick in x_ticks[::stride]:
        px = x(tick)
        label = fmt_bytes(tick) if x_unit == "B" else fmt_num(tick)
        body.append(
            f'<text x="{px:.2f}" y="{HEIGHT - MARGIN_B + 16}" text-anchor="middle" class="tick">'
            f"{escape(label)}</text>"
        )
    body.append(
        f'<text x="{(MARGIN_L + WIDTH - MARGIN_R) / 2:.1f}" y="{HEIGHT - MARGIN_B + 32}" '
        f'text-anchor="middle" class="axis-label">message size ({escape(x_unit)}, log2)</text>'
        if x_log2
        else ""
    )
    body.extend(_hlines(hlines, y))
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted((px, py) for px, py in s.points if not x_log2 or px > 0)
        coords = " ".join(f"{x(px):.2f},{y(py):.2f}" for px, py in pts)
        body.append(
            f'<g class="series" data-series="{escape(s.name)}"><polyline fill="none" stroke="{color}" '
            f'stroke-width="1.5" points="{coords}"/>'
        )
        for px, py in pts:
            body.append(
                f'<circle class="point" data-x="{px!r}" data-y="{py!r}" cx="{x(px):.2f}" cy="{y(py):.2f}" '
                f'r="3" fill="{color}"><title>{escape(s.name)}: {fmt_num(py)} {escape(y_unit)} at '
                f"{escape(fmt_bytes(px) if x_unit == 'B' else fmt_num(px))}</title></circle>"
            )
        body.append("</g>")
    legend = _legend([s.name for s in series])
    points = sum(len(s.points) for s in series)
    return _frame(title, "line-chart", f'data-points="{points}"', y, y_unit, body, legend)


def bar_chart(title: str, groups: list[BarGroup], hlines: list[HLine], *, y_unit: str = "") -> str:
    """Bars in groups (bar colour = its name's position); lines across the whole chart."""
    names: list[str] = []
    for g in groups:
        names.extend(b.name for b in g.bars if b.name not in names)
    values = [b.value for g in groups for b in g.bars]
    values += [h.value for h in hlines] + [m.value for g in groups for b in g.bars for m in b.marks]
    y = Scale(*_y_domain(values), HEIGHT - MARGIN_B, MARGIN_T)
    span = (WIDTH - MARGIN_L - MARGIN_R) / max(len(groups), 1)
    body: list[str] = []
    n_bars = sum(len(g.bars) for g in groups)
    for gi, g in enumerate(groups):
        gx = MARGIN_L + gi * span
        width = min(40.0, span * 0.8 / max(len(g.bars), 1))
        x0 = gx + (span - width * len(g.bars)) / 2
        for bi, b in enumerate(g.bars):
            bx = x0 + bi * width
            top, base = y(max(b.value, 0.0)), y(0.0)
            color = BAR_COLORS.get(b.name) or PALETTE[names.index(b.name) % len(PALETTE)]
            body.append(
                f'<rect class="bar" data-group="{escape(g.label)}" data-name="{escape(b.name)}" '
                f'data-value="{b.value!r}" x="{bx + 1:.2f}" y="{top:.2f}" width="{max(width - 2, 1):.2f}" '
                f'height="{base - top:.2f}" fill="{color}"><title>{escape(g.label)} {escape(b.name)}: '
                f"{fmt_num(b.value)} {escape(y_unit)}</title></rect>"
            )
            for m in b.marks:
                body.append(_hline(m, bx, bx + width, y, label=False))
        body.append(
            f'<text x="{gx + span / 2:.2f}" y="{HEIGHT - MARGIN_B + 16}" text-anchor="middle" '
            f'class="tick">{escape(g.label)}</text>'
        )
    body.extend(_hlines(hlines, y))
    legend = _legend(names) if len(names) > 1 else []
    return _frame(title, "bar-chart", f'data-bars="{n_bars}"', y, y_unit, body, legend)
