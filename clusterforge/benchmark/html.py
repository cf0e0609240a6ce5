"""The benchmark's page for people: one self-contained HTML file (Jinja2, autoescaped; inline CSS
and SVG; no scripts, nothing fetched). Rendered from the result document alone, so a stored
``result.json`` can be rendered again later."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from clusterforge.benchmark.breakdown import LABELS, PARTS
from clusterforge.benchmark.plots import Line, Stack, line_chart, log2_ticks, stacked_bars

TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "benchmark"
PART_COLORS = {
    LABELS["compute"]: "#1f77b4",
    LABELS["exposed_comm"]: "#d62728",
    LABELS["data_wait"]: "#ff7f0e",
    LABELS["optimizer"]: "#2ca02c",
    LABELS["checkpoint"]: "#9467bd",
    LABELS["other"]: "#7f7f7f",
}


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = lambda v: "–" if v is None else f"{100 * v:.0f} %"
    env.filters["ms"] = lambda v: "–" if v is None else f"{1000 * v:,.1f}"
    return env


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, int | float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"
    return str(value)


def scaling_chart(points: list[dict[str, Any]]) -> str:
    got = [(float(p["nodes"]), float(p["tokens_per_s"])) for p in points]
    base = next((p for p in points if p["nodes"] == 1), None)
    lines = [Line("measured", got)]
    if base is not None:
        per_rank = base["tokens_per_s"] / max(base["ranks"], 1)
        lines.append(
            Line(
                "ideal (linear from 1 node)",
                [(float(p["nodes"]), per_rank * p["ranks"]) for p in points],
                True,
            )
        )
    return line_chart("Training throughput against node count", lines, x_label="nodes", y_unit="tokens/s")


def breakdown_chart(points: list[dict[str, Any]]) -> str:
    stacks = [
        Stack(
            f"{p['nodes']} node{'s' if p['nodes'] != 1 else ''}",
            [(LABELS[k], float(p["breakdown"][k])) for k in PARTS],
        )
        for p in points
    ]
    return stacked_bars(
        "Step time by part (critical path, mean per step)", stacks, y_unit="s/step", colors=PART_COLORS
    )


def latency_charts(points: list[dict[str, Any]]) -> list[str]:
    batches = [float(p["batch"]) for p in points]
    ticks = log2_ticks(batches) if batches else None
    lat = line_chart(
        "Per-request latency against batch size",
        [Line("p50", [(float(p["batch"]), 1000 * p["latency_p50_s"]) for p in points]),
         Line("p99", [(float(p["batch"]), 1000 * p["latency_p99_s"]) for p in points]),
         Line("time to first token p50", [(float(p["batch"]), 1000 * p["ttft_p50_s"]) for p in points])],
        x_label="batch size (log2)", y_unit="ms", x_log2=True, x_ticks=ticks,
    )  # fmt: skip
    rate = line_chart(
        "Generation throughput against batch size",
        [Line("tokens/s", [(float(p["batch"]), float(p["tokens_per_s"])) for p in points])],
        x_label="batch size (log2)", y_unit="tokens/s", x_log2=True, x_ticks=ticks,
    )  # fmt: skip
    return [lat, rate]


def loader_chart(data: dict[str, Any]) -> str:
    rows = data.get("rows") or []
    lines = [Line("loader samples/s", [(float(r["workers"]), float(r["samples_per_s"])) for r in rows])]
    if data.get("consumed_samples_per_s"):
        lines.append(
            Line(
                "training step consumes (1 node)",
                [(float(r["workers"]), float(data["consumed_samples_per_s"])) for r in rows],
                True,
            )
        )
    return line_chart(
        "Loader throughput from shared storage", lines, x_label="reader processes", y_unit="samples/s"
    )


TELEMETRY_CHARTS = (
    ("cpu_pct", "CPU busy", "% of the node's cores", 1.0),
    ("net_tx_bps", "Network sent", "MB/s", 1e-6),
    ("net_rx_bps", "Network received", "MB/s", 1e-6),
    ("mem_bytes", "Memory in use", "MiB", 1 / (1 << 20)),
    ("gpu_util_pct", "GPU utilisation (mean of the node's GPUs)", "%", 1.0),
    ("power_w", "Power draw", "W", 1.0),
)


MAX_NODE_LINES = 12  # more nodes than this: the median, lowest and highest per sample instead


def _node_lines(nodes: dict[str, Any], field: str, scale: float) -> list[Line]:
    lines = []
    for node, tel in sorted(nodes.items()):
        series = tel.get("series") or {}
        if field in series:
            values = zip(series.get("t", []), series[field], strict=False)
            pts = [(t, v * scale) for t, v in values if v is not None]
            if pts:
                lines.append(Line(node, pts))
    if len(lines) <= MAX_NODE_LINES:
        return lines
    # People see summaries at scale: per sample index, the median node and the extremes.
    width = min(len(ln.points) for ln in lines)
    cols = [[ln.points[i] for ln in lines] for i in range(width)]
    t = [statistics.median(x for x, _ in col) for col in cols]
    return [
        Line(
            f"median of {len(lines)} nodes",
            [(t[i], statistics.median(v for _, v in c)) for i, c in enumerate(cols)],
        ),
        Line("lowest node", [(t[i], min(v for _, v in c)) for i, c in enumerate(cols)], True),
        Line("highest node", [(t[i], max(v for _, v in c)) for i, c in enumerate(cols)], True),
    ]


def telemetry_charts(key: str, nodes: dict[str, Any]) -> list[str]:
    out = []
    for field, title, unit, scale in TELEMETRY_CHARTS:
        lines = _node_lines(nodes, field, scale)
        if lines:
            out.append(line_chart(f"{key}: {title}", lines, x_label="seconds into the job", y_unit=unit))
    return out


SHOWN_RANKS = 16  # per-rank rows on the page: the slowest first; result.json keeps every rank


def shown_ranks(point: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(point.get("ranks_detail") or [], key=lambda k: -k["own_s"])[:SHOWN_RANKS]


def render(result: dict[str, Any]) -> str:
    train = (result.get("train") or {}).get("points") or []
    infer = (result.get("infer") or {}).get("points") or []
    data = result.get("data") or {}
    charts: dict[str, Any] = {
        "scaling": Markup(scaling_chart(train)) if train else None,
        "breakdown": Markup(breakdown_chart(train)) if train else None,
        "latency": [Markup(c) for c in latency_charts(infer)] if infer else [],
        "loader": Markup(loader_chart(data)) if data.get("rows") else None,
        "telemetry": {
            key: [Markup(c) for c in telemetry_charts(key, nodes)]
            for key, nodes in (result.get("telemetry") or {}).items()
        },  # fmt: skip
    }
    return _env().get_template("report.html.j2").render(
        r=result, charts=charts, parts=PARTS, labels=LABELS, colors=PART_COLORS,
        shown_ranks=shown_ranks, shown_max=SHOWN_RANKS,
    )  # fmt: skip
