"""npu-sweep report DIR: a sweep's results as plots in DIR/report/: PNG files (matplotlib) and one
self-contained interactive page (plotly), per workload:

    pareto_<workload>.png        latency against energy, and latency against area; the Pareto front joined
    energy_<workload>.png        energy per component, for each design point (fastest first)
    utilization_<workload>.png   tensor core, vector unit, DMA and DRAM bandwidth utilization per point
    sensitivity_<workload>.png   latency against each axis (each value's median over the other axes)
    roofline_<workload>.png      each point's MACs per cycle against its MACs per DRAM byte, under the
                                 roofs of the fastest and the slowest design
    kernel_rooflines_<workload>.png  with `kernel_rooflines: true` in the spec: each kernel's % of its
                                 roofline (rows, the longest kernels) on each design point (columns, fastest
                                 first), from kernels.parquet
    index.html                   all of it, interactive (hover a point for its axis values)
"""
import json
import math
import os
import re
import statistics
from typing import Dict, List, Sequence

COMPONENTS = ("tensor_core", "accumulator", "scratchpad", "vector_unit", "dma", "noc", "dram", "host_link", "control")
ENGINES = ("tensor_core", "vector_unit", "dma", "dram_bandwidth")


class ReportError(ValueError):
    pass


def pareto(points: Sequence[Dict], x: str, y: str) -> List[Dict]:
    """The points no other point beats on both x and y (lower is better), in order of x."""
    front, best_y = [], math.inf
    for p in sorted(points, key=lambda p: (p[x], p[y])):
        if p[y] < best_y:
            front.append(p)
            best_y = p[y]
    return front


def _value_text(value) -> str:
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20} MiB" if value < 1 << 30 or value % (1 << 30) else f"{value >> 30} GiB"
    return str(value)


def _label(row: Dict, axes: Sequence[str]) -> str:
    """A point's axis values, each named by the last two parts of its path (scratchpad.size_bytes=2 MiB)."""
    return ", ".join(f"{'.'.join(a.split('.')[-2:])}={_value_text(row['axis.' + a])}" for a in axes)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _load(out_dir: str):
    import pyarrow.parquet as pq
    path = os.path.join(out_dir, "results.parquet")
    if not os.path.exists(path):
        raise ReportError(f"{path}: no results (run npu-sweep run SPEC --out {out_dir} first)")
    rows = pq.read_table(path).to_pylist()
    try:
        with open(os.path.join(out_dir, "sweep.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        manifest = {}
    axes = manifest.get("axes") or [c[len("axis."):] for c in (rows[0] if rows else {}) if c.startswith("axis.")]
    return rows, axes, manifest


def _load_kernels(out_dir: str) -> List[Dict]:
    import pyarrow.parquet as pq
    path = os.path.join(out_dir, "kernels.parquet")
    return pq.read_table(path).to_pylist() if os.path.exists(path) else []


def kernel_fractions(kernels: Sequence[Dict], points: Sequence[str], top: int = 25):
    """The `top` kernel names by cycles over `points`, and each one's % of roofline on each point (its calls'
    bounds over their cycles; None where the point has no such kernel)."""
    totals: Dict[str, int] = {}
    sums: Dict[tuple, List[float]] = {}
    for k in kernels:
        if k["point"] not in points:
            continue
        totals[k["name"]] = totals.get(k["name"], 0) + k["cycles"]
        bound_and_cycles = sums.setdefault((k["name"], k["point"]), [0.0, 0])
        bound_and_cycles[0] += k["bound_cycles"]
        bound_and_cycles[1] += k["cycles"]
    names = sorted(totals, key=lambda n: -totals[n])[:top]
    grid = [[100 * sums[(n, p)][0] / max(1, sums[(n, p)][1]) if (n, p) in sums else None for p in points] for n in names]
    return names, grid


def _save(fig, path: str, files: List[str]) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    files.append(path)


def report(out_dir: str) -> List[str]:
    rows, axes, manifest = _load(out_dir)
    kernels = _load_kernels(out_dir)
    done = [r for r in rows if r.get("status") == "done"]
    if not done:
        raise ReportError(f"{out_dir}: no point finished ({len(rows)} failed); nothing to plot")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    report_dir = os.path.join(out_dir, "report")
    os.makedirs(report_dir, exist_ok=True)
    files: List[str] = []
    html_parts: List[str] = []
    workloads = sorted({r["workload"] for r in done})
    for workload in workloads:
        points = [r for r in done if r["workload"] == workload]
        slug = _slug(workload)
        for r in points:
            r["latency_us"] = r["latency_s"] * 1e6
            r["energy_uj"] = r["energy_pj"] / 1e6

        fig, panels = plt.subplots(1, 2, figsize=(11, 4.5))
        for ax, (y, y_label) in zip(panels, (("energy_uj", "energy (µJ)"), ("area_mm2", "area (mm²)"))):
            ax.scatter([p["latency_us"] for p in points], [p[y] for p in points], s=18, c="#9db4d6", label="design points")
            front = pareto(points, "latency_us", y)
            ax.plot([p["latency_us"] for p in front], [p[y] for p in front], "o-", color="#c0392b", label="Pareto front")
            for i, p in enumerate(front):
                ax.annotate(_label(p, axes), (p["latency_us"], p[y]), fontsize=6, xytext=(4, 2 + 8 * (i % 3)), textcoords="offset points")
            ax.set_xlabel("latency (µs)")
            ax.set_ylabel(y_label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{workload}: {len(points)} design points")
        _save(fig, os.path.join(report_dir, f"pareto_{slug}.png"), files)
        plt.close(fig)

        ordered = sorted(points, key=lambda p: p["latency_s"])
        fig, ax = plt.subplots(figsize=(max(6, 0.25 * len(ordered) + 3), 4.5))
        bottom = [0.0] * len(ordered)
        for component in COMPONENTS:
            values = [p.get(f"energy_{component}_pj", 0) / 1e6 for p in ordered]
            if any(values):
                ax.bar(range(len(ordered)), values, bottom=bottom, label=component)
                bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_xlabel("design point, fastest first")
        ax.set_ylabel("energy (µJ)")
        ax.set_title(f"{workload}: energy per component")
        ax.legend(fontsize=7, ncol=3)
        _save(fig, os.path.join(report_dir, f"energy_{slug}.png"), files)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(max(6, 0.3 * len(ordered) + 3), 4.5))
        width = 0.8 / len(ENGINES)
        for i, engine in enumerate(ENGINES):
            ax.bar([x + i * width for x in range(len(ordered))], [100 * p.get(f"utilization_{engine}", 0) for p in ordered], width,
                   label=engine)
        ax.set_xlabel("design point, fastest first")
        ax.set_ylabel("utilization (%)")
        ax.set_title(f"{workload}: utilization")
        ax.legend(fontsize=7)
        _save(fig, os.path.join(report_dir, f"utilization_{slug}.png"), files)
        plt.close(fig)

        if axes:
            fig, panels = plt.subplots(1, len(axes), figsize=(3.6 * len(axes), 3.6), squeeze=False)
            for ax, axis in zip(panels[0], axes):
                values = sorted({p["axis." + axis] for p in points}, key=lambda v: (isinstance(v, str), v))
                medians = [statistics.median(p["latency_us"] for p in points if p["axis." + axis] == v) for v in values]
                ax.plot([str(v) for v in values], medians, "o-")
                ax.set_xlabel(axis, fontsize=8)
                ax.set_ylabel("median latency (µs)")
                ax.tick_params(axis="x", labelsize=7, rotation=30)
                ax.grid(alpha=0.3)
            fig.suptitle(f"{workload}: sensitivity of latency to each axis")
            _save(fig, os.path.join(report_dir, f"sensitivity_{slug}.png"), files)
            plt.close(fig)

        if all(p.get("macs") and p.get("dram_bytes") for p in points):
            fig, ax = plt.subplots(figsize=(6.5, 4.5))
            intensity = [p["macs"] / p["dram_bytes"] for p in points]
            rate = [p["macs"] / max(1, p["device_cycles"]) for p in points]
            ax.scatter(intensity, rate, s=18, label="design points")
            for p, name, style in ((ordered[0], "fastest", "-"), (ordered[-1], "slowest", "--")):
                ridge = p["peak_macs_per_cycle"] / p["dram_bytes_per_cycle"]
                xs = sorted([min(intensity + [ridge]) / 4, ridge, max(intensity + [ridge]) * 4])
                ax.plot(xs, [min(p["peak_macs_per_cycle"], x * p["dram_bytes_per_cycle"]) for x in xs], style,
                        label=f"roof: {name} ({_label(p, axes)})")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("MACs per DRAM byte")
            ax.set_ylabel("MACs per cycle")
            ax.set_title(f"{workload}: the workload on each design's roofline")
            ax.legend(fontsize=6)
            ax.grid(alpha=0.3, which="both")
            _save(fig, os.path.join(report_dir, f"roofline_{slug}.png"), files)
            plt.close(fig)

        mine = [k for k in kernels if k["workload"] == workload]
        if mine:
            names, grid = kernel_fractions(mine, [p["point"] for p in ordered])
            fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(ordered) + 4), max(3, 0.28 * len(names) + 1.5)))
            image = ax.imshow([[math.nan if v is None else v for v in row] for row in grid], aspect="auto", cmap="viridis",
                              vmin=0, vmax=100, interpolation="nearest")
            ax.set_yticks(range(len(names)), [n[:48] for n in names], fontsize=6)
            ax.set_xticks(range(len(ordered)), [str(i) for i in range(len(ordered))], fontsize=6)
            ax.set_xlabel("design point, fastest first (its axes: results.csv, point column; kernels.csv)")
            ax.set_title(f"{workload}: each kernel's % of its roofline")
            if len(names) * len(ordered) <= 400:
                for y, row in enumerate(grid):
                    for x, v in enumerate(row):
                        if v is not None:
                            ax.text(x, y, f"{v:.0f}", ha="center", va="center", fontsize=5, color="white" if v < 50 else "black")
            fig.colorbar(image, ax=ax, label="% of roofline")
            _save(fig, os.path.join(report_dir, f"kernel_rooflines_{slug}.png"), files)
            plt.close(fig)

        html_parts.append(_html_section(workload, points, axes, first=not html_parts))

    failed = [r for r in rows if r.get("status") != "done"]
    page = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>npu-sweep report</title></head><body>",
            f"<h1>npu-sweep report</h1><p>{len(done)} points done, {len(failed)} failed; base config "
            f"{manifest.get('base', '?')}; axes: {', '.join(axes) or 'none'}.</p>"]
    if failed:
        page.append("<h2>Failed points</h2><ul>" + "".join(f"<li>{_label(r, axes)} on {r['workload']}: {r.get('error', '')}</li>" for r in failed) + "</ul>")
    page += html_parts + ["</body></html>"]
    html_path = os.path.join(report_dir, "index.html")
    from npusim import _C
    _C.write_file(html_path, "\n".join(page).encode())
    files.append(html_path)
    return files


def _html_section(workload: str, points: List[Dict], axes: Sequence[str], first: bool) -> str:
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.subplots import make_subplots
    hover = [_label(p, axes) for p in points]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("latency against energy", "latency against area"))
    for col, y in ((1, "energy_uj"), (2, "area_mm2")):
        fig.add_trace(go.Scatter(x=[p["latency_us"] for p in points], y=[p[y] for p in points], mode="markers", text=hover,
                                 marker=dict(color=[p["area_mm2"] for p in points], colorscale="Viridis", showscale=col == 2,
                                             colorbar=dict(title="mm²")),
                                 name="design points", showlegend=col == 1), row=1, col=col)
        front = pareto(points, "latency_us", y)
        fig.add_trace(go.Scatter(x=[p["latency_us"] for p in front], y=[p[y] for p in front], mode="lines+markers",
                                 text=[_label(p, axes) for p in front], line=dict(color="#c0392b"), name="Pareto front",
                                 showlegend=col == 1), row=1, col=col)
        fig.update_xaxes(title_text="latency (µs)", row=1, col=col)
    fig.update_yaxes(title_text="energy (µJ)", row=1, col=1)
    fig.update_yaxes(title_text="area (mm²)", row=1, col=2)
    fig.update_layout(title=f"{workload}: {len(points)} design points", height=480)
    parts = [pio.to_html(fig, full_html=False, include_plotlyjs="inline" if first else False)]
    if axes:
        numeric = [a for a in axes if all(isinstance(p["axis." + a], (int, float)) for p in points)]
        if numeric:
            dims = [dict(label=a.split(".")[-1], values=[p["axis." + a] for p in points]) for a in numeric]
            dims += [dict(label="latency (µs)", values=[p["latency_us"] for p in points]),
                     dict(label="energy (µJ)", values=[p["energy_uj"] for p in points])]
            coords = go.Figure(go.Parcoords(line=dict(color=[p["latency_us"] for p in points], colorscale="Viridis"), dimensions=dims))
            coords.update_layout(title=f"{workload}: axes against latency and energy", height=420)
            parts.append(pio.to_html(coords, full_html=False, include_plotlyjs=False))
    return f"<h2>{workload}</h2>" + "\n".join(parts)
