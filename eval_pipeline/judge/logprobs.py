"""Scores read from the judge's token probabilities (G-Eval): the distribution over the scale at the position
where the judge wrote each score, and its expected value.

The answer's tokens (with their top alternatives, as OpenAI and vLLM return them for ``logprobs: true,
top_logprobs: N``) are laid end to end; where the JSON answer writes ``"<key>": <digits>`` and the digits are one
token, the alternatives at that token that are whole numbers on the key's scale, renormalised, are the
distribution. A score written over several tokens (``100`` as ``10`` + ``0``), or an answer whose tokens do not
spell its text, has no distribution: the written score is used.
"""

from __future__ import annotations

import bisect
import math
import re

Distribution = dict[int, float]


def score_distributions(
    text: str | None, logprobs: list | None, scales: dict[str, tuple[int, int]]
) -> dict[str, Distribution]:
    if not text or not logprobs:
        return {}
    tokens = [t[0] for t in logprobs]
    if "".join(tokens) != text:
        return {}
    starts = [0]
    for t in tokens[:-1]:
        starts.append(starts[-1] + len(t))
    out: dict[str, Distribution] = {}
    for key, (lo, hi) in scales.items():
        m = re.search(rf'"{re.escape(key)}"\s*:\s*(-?\d+)', text)
        if not m:
            continue
        i = bisect.bisect_right(starts, m.start(1)) - 1
        token = tokens[i]
        lead = len(token) - len(token.lstrip())
        if token.strip() != m.group(1) or starts[i] + lead != m.start(1):
            continue  # the number is not one token of its own
        probs: Distribution = {}
        valid = True
        for alt, logprob in logprobs[i][1]:
            # a log probability is at most 0 (a little rounding allowed): 1000, NaN or text is no distribution
            if not isinstance(logprob, int | float) or not (-math.inf <= logprob <= 1e-6):
                valid = False
                break
            a = alt.strip()
            if re.fullmatch(r"-?\d+", a) and lo <= int(a) <= hi:
                probs[int(a)] = probs.get(int(a), 0.0) + math.exp(logprob)
        total = sum(probs.values())
        if valid and total > 0:
            out[key] = {v: p / total for v, p in sorted(probs.items())}
    return out


def expected(dist: Distribution) -> float:
    return float(sum(v * p for v, p in dist.items()))
