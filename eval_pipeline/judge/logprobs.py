"""Scores read from the judge's token probabilities (G-Eval): the distribution over the scale at the position
where the judge wrote each score, and its expected value.

The answer's tokens (with their top alternatives, as OpenAI, vLLM and llama.cpp return them for ``logprobs: true,
top_logprobs: N``) are laid end to end and searched for ``"<key>": <digits>``: the token stream is what the model
wrote, so a fence or whitespace a server strips from the message text does not hide it (the digits must still be
the score the answer gives). The alternatives at the first digit's token that are whole numbers on the key's
scale are the distribution; a number written over two tokens (``10`` as ``1`` + ``0``) is read as one number
(P(10) = P(``1``) · P(``0`` after it); P(1) = P(``1``) · the probability that what follows cannot go on with a
number; a longer number off the scale, ``11``-``19`` on 1-10, is dropped, never booked as ``1``, and the rest
renormalised, or refused below the floor). A distribution is used only when it is unambiguous (an alternative that
may begin a longer number on the scale, say ``1`` before ``10``, holds little probability) and when at least
MIN_PROB_ON_SCALE of the probability lands on the scale; otherwise the written score is used and the reason is
recorded (``distribution_note``).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any

Distribution = dict[int, float]
MIN_PROB_ON_SCALE = 0.5  # below this share of probability on the scale, the alternatives say little about it
AMBIGUOUS_MASS = 0.05  # probability on an alternative that may begin a longer number, tolerated as its own value


@dataclass(frozen=True)
class Reading:
    """The distribution read for one score (None: not usable), the probability that landed on the scale, and why
    it is not used when it is not."""

    dist: Distribution | None
    share: float | None = None
    note: str | None = None


def _probability(logprob: object) -> float | None:
    """exp(logprob) for a log probability (at most 0, a little rounding allowed); None for anything else."""
    if not isinstance(logprob, int | float) or isinstance(logprob, bool) or not (-math.inf <= logprob <= 1e-6):
        return None
    return math.exp(min(float(logprob), 0.0))


def _alternatives(entry: list[Any]) -> list[tuple[str, float]] | None:
    out = []
    for alt in entry[1] if len(entry) > 1 and isinstance(entry[1], list) else []:
        if not isinstance(alt, list | tuple) or len(alt) < 2 or not isinstance(alt[0], str):
            return None
        p = _probability(alt[1])
        if p is None:
            return None
        out.append((alt[0].strip(), p))
    return out


def read_distributions(
    text: str | None,
    logprobs: list[Any] | None,
    scales: dict[str, tuple[int, int]],
    written: dict[str, int] | None = None,
    floor: float = MIN_PROB_ON_SCALE,
) -> dict[str, Reading]:
    """Per key of ``scales``: the distribution over its scale where the judge wrote the score, or why there is
    none. ``written``: the scores the answer gives (the digits found in the tokens must be those)."""
    if not text or not logprobs:
        return {}
    tokens = [t[0] if isinstance(t, list | tuple) and t and isinstance(t[0], str) else "" for t in logprobs]
    joined = "".join(tokens)
    starts = [0]
    for t in tokens[:-1]:
        starts.append(starts[-1] + len(t))
    out: dict[str, Reading] = {}
    for key, (lo, hi) in scales.items():
        m = re.search(rf'"{re.escape(key)}"\s*:\s*(-?\d+)', joined)
        if not m:
            out[key] = Reading(None, note="the score is not in the tokens")
            continue
        if written is not None and key in written and int(m.group(1)) != written[key]:
            out[key] = Reading(None, note="the tokens spell another score than the answer")
            continue
        out[key] = _at(logprobs, tokens, starts, m.start(1), m.group(1), lo, hi, floor)
    return out


def _at(
    logprobs: list[Any], tokens: list[str], starts: list[int], at: int, digits: str, lo: int, hi: int, floor: float
) -> Reading:
    i = bisect.bisect_right(starts, at) - 1
    token = tokens[i]
    lead = len(token) - len(token.lstrip())
    if starts[i] + lead != at or not token.strip() or not digits.startswith(token.strip()):
        return Reading(None, note="the score shares a token with other text")
    first = _alternatives(logprobs[i])
    if first is None:
        return Reading(None, note="a log probability that is not one")
    probs: Distribution = {}
    ambiguous = 0.0
    rest = digits[len(token.strip()) :]
    nxt = None
    if rest:  # the number goes on in the next token: read it as one number (10 = "1" then "0")
        if i + 1 >= len(tokens) or tokens[i + 1].strip() != rest:
            return Reading(None, note="a number over more than two tokens")
        nxt = _alternatives(logprobs[i + 1])
        if nxt is None:
            return Reading(None, note="a log probability that is not one")
    elif i + 1 < len(tokens) and _may_go_on(token.strip(), lo, hi):
        # the number ended here ("1" then "," on 1-10): the alternatives the model had for the next token, after
        # the same digit, say whether it might have gone on (P(10) = P("1") · P("0" there)) or stopped
        nxt = _alternatives(logprobs[i + 1])
        if nxt is None:
            return Reading(None, note="a log probability that is not one")
    chosen_first = token.strip()
    for alt, p in first:
        if not re.fullmatch(r"-?\d+", alt):
            continue
        if nxt is not None and alt == chosen_first:  # split by what follows: a longer number or this one alone
            ends = 0.0  # the continuations that cannot go on with a number: the number is this one alone
            for alt2, q in nxt:
                if re.match(r"\d", alt2):
                    # a longer number: booked as itself when on the scale; off it (11-19 on 1-10: the grammar
                    # forbids them) dropped, never booked as this one, and the rest renormalised below
                    if re.fullmatch(r"\d+", alt2) and lo <= int(alt + alt2) <= hi:
                        probs[int(alt + alt2)] = probs.get(int(alt + alt2), 0.0) + p * q
                else:
                    ends += q
            if lo <= int(alt) <= hi:
                probs[int(alt)] = probs.get(int(alt), 0.0) + p * ends
            continue
        if _may_go_on(alt, lo, hi):  # "1" may begin "10": what follows it is unknown here
            ambiguous += p
        if lo <= int(alt) <= hi:
            probs[int(alt)] = probs.get(int(alt), 0.0) + p
    share = sum(probs.values())
    if ambiguous > AMBIGUOUS_MASS:
        return Reading(None, share, f"{ambiguous:.2f} of the probability may begin a longer number: not read")
    if share <= 0:
        return Reading(None, 0.0, "no probability on the scale")
    if share < floor:
        return Reading(None, share, f"only {share:.2f} of the probability on the scale (< {floor:g}): not read")
    return Reading({v: p / share for v, p in sorted(probs.items())}, share)


def _may_go_on(digits: str, lo: int, hi: int) -> bool:
    """Whether a number on the scale begins with ``digits`` and is longer ("1" on 1-10: "10")."""
    return any(str(v).startswith(digits) and len(str(v)) > len(digits) for v in range(max(lo, 0), hi + 1))


def score_distributions(
    text: str | None, logprobs: list[Any] | None, scales: dict[str, tuple[int, int]]
) -> dict[str, Distribution]:
    """The usable distributions only (see ``read_distributions``)."""
    return {k: r.dist for k, r in read_distributions(text, logprobs, scales).items() if r.dist is not None}


def expected(dist: Distribution) -> float:
    return float(sum(v * p for v, p in dist.items()))
