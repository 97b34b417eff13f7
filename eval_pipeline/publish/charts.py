"""The report's charts, drawn as inline SVG with no library: a trend of means with their intervals across checkpoints,
and distributions per checkpoint."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC", "#EECA3B"]


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def trend_svg(df: pd.DataFrame, title: str, width: int = 460, height: int = 230) -> str:
    """Lines per score across checkpoints (in order), with CI whiskers. df: checkpoint, score, mean, ci_low, ci_high."""
    if df.empty:
        return ""
    ckpts = list(dict.fromkeys(df.checkpoint))
    low = df[["mean", "ci_low"]].to_numpy(dtype=float)
    high = df[["mean", "ci_high"]].to_numpy(dtype=float)
    if np.isnan(low).all() or np.isnan(high).all():  # no score yet (every judge score missing): nothing to draw
        return ""
    lo, hi = float(np.nanmin(low)), float(np.nanmax(high))
    if not math.isfinite(lo) or not math.isfinite(hi):
        return ""
    if hi - lo < 1e-9:
        hi, lo = hi + 0.5, lo - 0.5
    pad_l, pad_r, pad_t, pad_b = 44, 130, 24, 30
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b

    def x(i: float) -> float:
        return pad_l + (pw * (i / max(1, len(ckpts) - 1)) if len(ckpts) > 1 else pw / 2)

    def y(v: float) -> float:
        return pad_t + ph * (1 - (v - lo) / (hi - lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(title)}">',
        f'<text x="{pad_l}" y="15" font-size="12" font-weight="bold">{esc(title)}</text>',
        f'<line x1="{pad_l}" y1="{pad_t + ph}" x2="{pad_l + pw}" y2="{pad_t + ph}" stroke="#999"/>',
    ]
    for frac in (0, 0.5, 1):
        v = lo + (hi - lo) * frac
        parts.append(f'<text x="{pad_l - 4}" y="{y(v) + 4:.1f}" font-size="9" text-anchor="end">{v:.2f}</text>')
        parts.append(f'<line x1="{pad_l}" y1="{y(v):.1f}" x2="{pad_l + pw}" y2="{y(v):.1f}" stroke="#eee"/>')
    for i, c in enumerate(ckpts):
        parts.append(f'<text x="{x(i):.1f}" y="{height - 10}" font-size="9" text-anchor="middle">{esc(c)}</text>')
    for k, (score, g) in enumerate(df.groupby("score", sort=False)):
        color = PALETTE[k % len(PALETTE)]
        g = g.set_index("checkpoint").reindex(ckpts)
        pts = [(x(i), y(m)) for i, m in enumerate(g["mean"]) if m == m]
        if len(pts) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                f'points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}"/>'
            )
        for i, (m, ci_lo, ci_hi) in enumerate(zip(g["mean"], g["ci_low"], g["ci_high"])):
            if m != m:
                continue
            if ci_lo == ci_lo and ci_hi == ci_hi:
                parts.append(
                    f'<line x1="{x(i):.1f}" y1="{y(ci_lo):.1f}" x2="{x(i):.1f}" y2="{y(ci_hi):.1f}" stroke="{color}" '
                    f'stroke-width="1"/>'
                )
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(m):.1f}" r="3" fill="{color}"><title>{esc(score)} {m:.3f} '
                f"[{ci_lo:.3f}, {ci_hi:.3f}]</title></circle>"
            )
        parts.append(
            f'<rect x="{pad_l + pw + 10}" y="{pad_t + 14 * k - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{pad_l + pw + 24}" y="{pad_t + 14 * k + 1}" font-size="10">{esc(score)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def histogram_svg(
    values: dict[str, np.ndarray], title: str, width: int = 460, height: int = 200, bins: int = 12
) -> str:
    """Overlaid step histograms of one score per checkpoint."""
    present = [v for v in values.values() if len(v)]
    if not present:  # every score missing (a judge outage): no chart, not an error
        return ""
    allv = np.concatenate(present)
    lo, hi = float(allv.min()), float(allv.max())
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    pad_l, pad_r, pad_t, pad_b = 36, 130, 24, 28
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b
    hists = {k: np.histogram(v, bins=edges)[0] / max(1, len(v)) for k, v in values.items()}
    top = max(float(h.max()) for h in hists.values()) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(title)}">',
        f'<text x="{pad_l}" y="15" font-size="12" font-weight="bold">{esc(title)}</text>',
        f'<line x1="{pad_l}" y1="{pad_t + ph}" x2="{pad_l + pw}" y2="{pad_t + ph}" stroke="#999"/>',
        f'<text x="{pad_l}" y="{height - 8}" font-size="9">{lo:.2f}</text>',
        f'<text x="{pad_l + pw}" y="{height - 8}" font-size="9" text-anchor="end">{hi:.2f}</text>',
    ]
    for k, (name, h) in enumerate(hists.items()):
        color = PALETTE[k % len(PALETTE)]
        pts = []
        for i, v in enumerate(h):
            x0 = pad_l + pw * i / bins
            x1 = pad_l + pw * (i + 1) / bins
            yy = pad_t + ph * (1 - v / top)
            pts += [f"{x0:.1f},{yy:.1f}", f"{x1:.1f},{yy:.1f}"]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(pts)}"/>')
        parts.append(
            f'<rect x="{pad_l + pw + 10}" y="{pad_t + 14 * k - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{pad_l + pw + 24}" y="{pad_t + 14 * k + 1}" font-size="10">{esc(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
