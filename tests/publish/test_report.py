"""The static report draws what the data says, and drawing it never fails an evaluation."""

import re

import pandas as pd

from eval_pipeline.publish.charts import histogram_svg, trend_svg


def test_trend_whiskers_span_the_interval_inside_the_chart():
    df = pd.DataFrame(
        {
            "checkpoint": ["a", "b", "c"],
            "score": "x",
            "mean": [3.0, 3.5, 4.0],
            "ci_low": [2.5, 3.1, 3.9],
            "ci_high": [3.4, 3.9, 4.1],
        }
    )
    svg = trend_svg(df, "x by checkpoint")
    whisker = r'<line x1="([\d.]+)" y1="([\d.-]+)" x2="\1" y2="([\d.-]+)" stroke="[^"]+" stroke-width="1"/>'
    lines = [(float(y1), float(y2)) for _, y1, y2 in re.findall(whisker, svg)]
    assert len(lines) == 3
    dots = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.-]+)"', svg)]
    for (y_low, y_high), y_mean in zip(lines, dots):  # SVG y grows downwards: low below the mean, high above it
        assert y_high < y_mean < y_low


def test_no_scores_at_all_draw_no_histogram_instead_of_failing():
    assert histogram_svg({"ckpt-1": pd.Series([], dtype=float).to_numpy()}, "x") == ""


def test_trend_points_sit_on_one_scale():
    df = pd.DataFrame(
        {"checkpoint": ["a", "b"], "score": "x", "mean": [3.0, 4.0], "ci_low": [2.5, 3.9], "ci_high": [3.4, 4.1]}
    )
    svg = trend_svg(df, "x", width=460, height=230)  # plot area: y from 24 (4.1) to 200 (2.5)
    y = lambda v: 24 + 176 * (1 - (v - 2.5) / (4.1 - 2.5))  # noqa: E731
    dots = [float(v) for v in re.findall(r'<circle cx="[\d.]+" cy="([\d.-]+)"', svg)]
    assert dots == [round(y(3.0), 1), round(y(4.0), 1)]
    whisker = r'<line x1="([\d.]+)" y1="([\d.-]+)" x2="\1" y2="([\d.-]+)" stroke="[^"]+" stroke-width="1"/>'
    spans = [(float(a), float(b)) for _, a, b in re.findall(whisker, svg)]
    assert spans == [(round(y(2.5), 1), round(y(3.4), 1)), (round(y(3.9), 1), round(y(4.1), 1))]
