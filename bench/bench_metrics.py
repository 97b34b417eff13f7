#!/usr/bin/env python3
"""Every per-sample metric of every rubric over N samples (default 100,000): the batch function the
pipeline runs against a per-row pure-Python implementation, in the same process. Prints times, the
speed ratio and whether every value is identical. Not a timed test.

The per-row implementation is the metric's dedicated reference where it has one (NVCS, ERTD, ALMP:
straight from the UWU definitions, textstat per text for ERTD), else the same registered metric called
one record at a time with every memo emptied between records (so nothing computed for one row serves
another, as in a per-row implementation). The samples are the shipped sample data, through
the real validation, recombined so that every response is new while contexts (personas, source
chunks, triples, reference dialogues, test cases) repeat as they do in real evaluation sets.

    python bench/bench_metrics.py [--n 100000] [--only npc_dialogue ...]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from eval_pipeline.ingest.jsonl import read_jsonl
from eval_pipeline.ingest.samples import to_records
from eval_pipeline.ingest.validation import validate_raw
from eval_pipeline.metrics import METRICS, _load_all
from eval_pipeline.metrics.attributes import almp_reference
from eval_pipeline.metrics.style import (
    char_ngram_cosine,
    ertd_pair,
    strip_speaker_prefixes,
)
from eval_pipeline.rubrics import load_rubric

ROOT = Path(__file__).resolve().parent.parent
RUBRICS = ["answer_quality", "empathetic_dialogue", "kg_qa", "npc_dialogue", "roleplay_style"]


def corpus(rubric_name: str, n: int, seed: int = 11) -> list[dict[str, Any]]:
    rubric = load_rubric(ROOT / "rubric_configs" / f"{rubric_name}.yaml")
    base: list[dict[str, Any]] = []
    for f in sorted((ROOT / "data" / "checkpoints").glob(f"*/{rubric_name}.jsonl")):
        raw = read_jsonl(f, f.parent.name).frame
        base += to_records(rubric, validate_raw(rubric, raw).samples)
    field = rubric.inputs.response_field
    sentences = sorted({s.strip() for r in base for s in str(r.get(field) or "").split(". ") if s.strip()})
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = ". ".join(rng.sample(sentences, rng.randint(1, 4)))
        out.append({**base[i % len(base)], "sample_id": f"s{i}", field: text})
    return out


def per_row(fn: Callable, params: dict) -> Callable[[list[dict]], dict[str, list]]:
    """The registered metric one record at a time, nothing carried from one row to the next."""

    def run(records: list[dict]) -> dict[str, list]:
        cols: dict[str, list] = {}
        for r in records:
            cold()
            for k, v in fn([r], params).items():
                cols.setdefault(k, []).extend(v)
        return cols

    return run


def dedicated_reference(function: str, params: dict) -> Callable[[list[dict]], dict[str, list]] | None:
    ref_f, txt_f = params.get("reference_field", "sample_dialogues"), params.get("text_field", "response")
    if function == "nvcs":
        n = int(params.get("n", 3))
        return lambda rs: {
            "nvcs": [
                char_ngram_cosine(
                    strip_speaker_prefixes(r.get(ref_f) or []), strip_speaker_prefixes(r.get(txt_f) or ""), n
                )
                for r in rs
            ]
        }
    if function == "ertd":

        def ertd(rs: list[dict]) -> dict[str, list]:
            vals = [
                ertd_pair(strip_speaker_prefixes(r.get(ref_f) or []), strip_speaker_prefixes(r.get(txt_f) or ""))
                for r in rs
            ]
            return {
                "ertd": [v[0] for v in vals],
                "fre_reference": [v[1] for v in vals],
                "fre_response": [v[2] for v in vals],
            }

        return ertd
    if function == "almp":
        a_f = params.get("attributes_field", "attributes")
        return lambda rs: {"almp": [almp_reference(r.get(a_f) or [], r.get(txt_f) or "")[0] for r in rs]}
    return None


def cold() -> None:
    """Empty every per-value memo the metrics keep, so neither timing starts with the other's work done
    (the dictionaries themselves, WordNet and CMUdict, stay loaded: loading them is in neither timing)."""
    from eval_pipeline.core import text
    from eval_pipeline.metrics import attributes, style, text_metrics

    for fn in (
        text.stem,
        text._phrase_re,
        text.content_stems,
        text.words,
        text.content_words,
        text_metrics._value_words,
        attributes.synset_names,
        attributes._adjective_lemma,
        style._ts_syllables,
        style._stripped,
    ):
        fn.cache_clear()


def same(a: list, b: list) -> bool:
    def eq(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return x == y or (math.isnan(x) and math.isnan(y))
        return x == y

    return len(a) == len(b) and all(eq(x, y) for x, y in zip(a, b))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--only", nargs="*", default=RUBRICS)
    args = ap.parse_args()
    _load_all()
    ertd_pair("Warm up the CMU dictionary.", "Once.")  # loading dictionaries is not part of either timing
    almp_reference(["warm"], "Warm up WordNet.")
    rows = []
    for name in args.only:
        rubric = load_rubric(ROOT / "rubric_configs" / f"{name}.yaml")
        records = corpus(name, args.n)
        for spec in rubric.metrics:
            params = dict(spec.params)
            fn = METRICS[spec.function]
            ref = dedicated_reference(spec.function, params) or per_row(fn, params)
            cold()
            t0 = time.perf_counter()
            fast = fn(records, params)
            t_fast = time.perf_counter() - t0
            cold()
            t0 = time.perf_counter()
            slow = ref(records)
            t_slow = time.perf_counter() - t0
            identical = all(same(list(fast[k]), list(v)) for k, v in slow.items())
            rows.append(
                dict(
                    rubric=name,
                    metric=spec.function,
                    batch_s=round(t_fast, 2),
                    per_row_s=round(t_slow, 2),
                    ratio=round(t_slow / t_fast, 1) if t_fast else float("inf"),
                    us_per_sample=round(t_fast / args.n * 1e6, 1),
                    identical=identical,
                )
            )
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.n} samples per rubric")
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
