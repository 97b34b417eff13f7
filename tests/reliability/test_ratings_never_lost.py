"""Ratings never silently lost (#19.7-9): every rating row read ends in the ratings table or the quarantine,
with the line it starts on; CSV is read as spreadsheets write it; a score is a number in the digits 0-9; cells
the project writes for spreadsheets are never run as formulas, in whatever width their sign is written."""

import pytest

from eval_pipeline.ingest.ratings import load_ratings
from eval_pipeline.publish.worklists import neutralise

IDS = {"kg-001", "kg-002", "kg-003", "kg-004"}
HEAD = "sample_id,evaluator,checkpoint,notes,relevance,accuracy,completeness,fluency,kg_alignment"


def _load(tmp_path, rubrics, name, text, encoding="utf-8", raw=None):
    folder = tmp_path / "kg_qa"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(raw if raw is not None else text.encode(encoding))
    return load_ratings(rubrics["kg_qa"], "ckpt-0100", IDS, root=tmp_path)


def _accounted(load, rows):
    """Every row read is in the ratings or the quarantine, or both: a row whose bad cell is quarantined keeps its
    other ratings (ratings: one row per dimension rated)."""
    kept = set(load.ratings.line_number)
    quarantined = set(load.quarantine[load.quarantine.line_number > 1].line_number)
    assert len(kept | quarantined) == rows
    return kept | quarantined


def test_escaped_quotes_and_multi_line_cells_keep_rows_and_line_numbers(tmp_path, rubrics):
    text = (
        "\n".join(
            [
                HEAD,
                'kg-001,ann,ckpt-0100,"she said ""fine""",4,4,4,4,4',
                'kg-002,ann,ckpt-0100,"two\nlines, with a comma",5,5,5,5,5',
                "kg-003,ann,ckpt-0100,plain,3,3,3,3,3",
                'kg-004,ann,ckpt-0100,"a ""quote"" and\na newline",9,3,3,3,3',
            ]
        )
        + "\n"
    )
    load = _load(tmp_path, rubrics, "r.csv", text)
    assert sorted(load.ratings.sample_id.unique()) == ["kg-001", "kg-002", "kg-003", "kg-004"]
    assert _accounted(load, 4) == {2, 3, 5, 6}  # the rows start on lines 2, 3, 5, 6
    q = load.quarantine.iloc[0]
    assert q.line_number == 6 and "relevance '9' is off the scale" in q.reason and q.raw_line.count("\n") == 1
    # #72: the bad cell costs only itself: kg-004's four other ratings are kept, from the same line
    kept = load.ratings[load.ratings.sample_id == "kg-004"]
    assert sorted(kept.dimension) == ["accuracy", "completeness", "fluency", "kg_alignment"]
    assert set(kept.line_number) == {6} and "the row's other ratings are kept" in q.reason


def test_rows_that_cannot_be_placed_are_quarantined_not_dropped(tmp_path, rubrics):
    no_ckpt = "sample_id,evaluator,relevance\nkg-001,ann,4\nkg-002,ann,4\n"
    load = _load(tmp_path, rubrics, "team-batch.csv", no_ckpt)
    assert len(load.ratings) == 0 and len(load.quarantine) == 2
    assert load.quarantine.reason.str.contains("no checkpoint for this row").all()
    case = f"{HEAD}\nkg-001,ann,CKPT-0100,,4,4,4,4,4\nkg-002,ann,ckpt-0200,,4,4,4,4,4\n"
    load = _load(tmp_path / "b", rubrics, "b.csv", case)
    assert len(load.quarantine) == 1 and "only in letter case" in load.quarantine.reason.iloc[0]
    assert load.rows_other_checkpoints == 1  # ckpt-0200's row: kept for that checkpoint's run


def test_a_bom_and_one_latin1_byte_cost_only_that_row(tmp_path, rubrics):
    text = f"{HEAD}\nkg-001,ann,ckpt-0100,caf\xe9,4,4,4,4,4\nkg-002,ann,ckpt-0100,ok,5,5,5,5,5\n"
    raw = b"\xef\xbb\xbf" + text.encode("latin-1")
    load = _load(tmp_path, rubrics, "r.csv", None, raw=raw)
    assert list(load.ratings.sample_id.unique()) == ["kg-002"]
    assert len(load.quarantine) == 1 and "not valid UTF-8" in load.quarantine.reason.iloc[0]


def test_a_broken_header_quarantines_every_row_whatever_the_file_name(tmp_path, rubrics):
    load = _load(tmp_path, rubrics, "misc.csv", "sample,who,relevance\nkg-001,ann,4\nkg-002,ann,5\n")
    assert len(load.ratings) == 0 and sorted(load.quarantine.line_number) == [1, 2, 3]


@pytest.mark.parametrize("score", ["٤", "４", "4️", "4.0e0", "0x4", "4_0"])
def test_scores_are_digits_0_to_9_only(tmp_path, rubrics, score):
    load = _load(tmp_path, rubrics, "r.csv", f"{HEAD}\nkg-001,ann,ckpt-0100,,{score},4,4,4,4\n")
    assert "relevance" not in set(load.ratings.dimension) and len(load.ratings) == 4  # the other cells kept
    assert "relevance" in load.quarantine.reason.iloc[0]
    assert "written with the digits 0-9" in load.quarantine.reason.iloc[0]
    alone = _load(tmp_path / "b", rubrics, "r.csv", f"{HEAD}\nkg-001,ann,ckpt-0100,,{score},,,,\n")
    assert len(alone.ratings) == 0 and "written with the digits 0-9" in alone.quarantine.reason.iloc[0]


@pytest.mark.parametrize("cell", ["=1+1", "＝1+1", "＋SUM(A1)", "－2", "＠cmd", "+1", "\t=x"])
def test_formula_prefixes_in_any_width_are_neutralised(cell):
    assert neutralise(cell) == "'" + cell


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling", "devzero"])
def test_a_ratings_file_that_is_not_a_file_is_refused_with_its_path_and_the_others_are_read(rubrics, tmp_path, kind):
    """#36.8: a directory, a FIFO (reading would block), a dangling link or a link to /dev/zero (never ends)
    named like a ratings file: refused with its path, and the good file beside it still read (also *.CSV)."""
    import os

    rubric = rubrics["kg_qa"]
    folder = tmp_path / "kg_qa"
    folder.mkdir()
    dims = list(rubric.rating_scales)
    (folder / "good.CSV").write_text(
        "sample_id,evaluator,checkpoint," + ",".join(dims) + "\n" + "s1,alice,c1," + ",".join("3" for _ in dims) + "\n"
    )
    bad = folder / "bad.csv"
    if kind == "directory":
        bad.mkdir()
    elif kind == "fifo":
        os.mkfifo(bad)
    elif kind == "dangling":
        bad.symlink_to(tmp_path / "nowhere.csv")
    else:
        bad.symlink_to("/dev/zero")
    load = load_ratings(rubric, "c1", {"s1"}, root=tmp_path)
    assert set(load.ratings.evaluator) == {"alice"}  # the good file was read
    refused = load.quarantine[load.quarantine.source_file == "bad.csv"]
    assert (
        len(refused) == 1 and str(bad) in refused.reason.iloc[0] and refused.reason.iloc[0].startswith("file refused")
    )


def _good_rows(ids, start=2):
    return [f"kg-00{i},ann,ckpt-0100,fine,4,4,4,4,4" for i in ids]


@pytest.mark.parametrize("where", ["notes", "last"])
def test_a_quote_never_closed_costs_only_its_own_line(tmp_path, rubrics, where):
    """#36.11: an unclosed quote in a cell does not swallow the rows after it."""
    head = (
        HEAD
        if where == "notes"
        else "sample_id,evaluator,checkpoint,relevance,accuracy,completeness,fluency,kg_alignment,notes"
    )
    broken = 'kg-001,ann,ckpt-0100,"oops,4,4,4,4,4' if where == "notes" else 'kg-001,ann,ckpt-0100,4,4,4,4,4,"oops'
    rows = _good_rows([2, 3, 4]) if where == "notes" else [f"kg-00{i},ann,ckpt-0100,4,4,4,4,4,fine" for i in (2, 3, 4)]
    load = _load(tmp_path, rubrics, "r.csv", "\n".join([head, broken, *rows]) + "\n")
    assert sorted(load.ratings.sample_id.unique()) == ["kg-002", "kg-003", "kg-004"]
    assert list(load.quarantine.line_number) == [2] and "quote opened on line 2" in load.quarantine.reason.iloc[0]
    assert _accounted(load, 4) == {2, 3, 4, 5}


def test_a_quote_never_closed_on_the_last_row_is_quarantined(tmp_path, rubrics):
    load = _load(
        tmp_path,
        rubrics,
        "r.csv",
        f"{HEAD}\n" + "\n".join(_good_rows([1])) + '\nkg-002,ann,ckpt-0100,"a\nb,4,4,4,4,4\n',
    )
    assert list(load.ratings.sample_id.unique()) == ["kg-001"]
    assert "never closed" in load.quarantine.reason.iloc[0]


def test_a_cell_of_a_megabyte_is_read_and_costs_nothing_after_it(tmp_path, rubrics):
    """#36.12: a notes cell past the csv module's 128 KiB default."""
    big = "x" * (1024 * 1024)
    load = _load(
        tmp_path,
        rubrics,
        "r.csv",
        f"{HEAD}\nkg-001,ann,ckpt-0100,{big},4,4,4,4,4\n" + "\n".join(_good_rows([2, 3])) + "\n",
    )
    assert sorted(load.ratings.sample_id.unique()) == ["kg-001", "kg-002", "kg-003"] and load.quarantine.empty


@pytest.mark.parametrize(
    "header, says",
    [
        (HEAD + ",relevance", "more than once"),
        (
            "sample_id,evaluator,checkpoint,notes,relevance,accuracy,completeness,fluncy,kg_alignment",
            "'fluncy' (did you mean 'fluency'",
        ),
        ("sample_id,evalutor,checkpoint,notes,relevance,accuracy,completeness,fluency,kg_alignment", "required column"),
    ],
)
def test_a_header_that_would_lose_ratings_quarantines_the_file(tmp_path, rubrics, header, says):
    """#36.13, 15: a repeated dimension column or a misspelt one is refused, every row kept with the reason."""
    n = header.count(",") + 1
    rows = [
        ",".join(["kg-001", "ann", "ckpt-0100", ""] + ["4"] * (n - 4)),
        ",".join(["kg-002", "ann", "ckpt-0100", ""] + ["5"] * (n - 4)),
    ]
    load = _load(tmp_path, rubrics, "r.csv", "\n".join([header, *rows]) + "\n")
    assert load.ratings.empty and sorted(load.quarantine.line_number) == [1, 2, 3]
    assert load.quarantine.reason.str.contains(says, regex=False).all() and says in " ".join(load.problems)


def test_an_extra_column_that_is_no_dimension_is_named_not_silently_dropped(tmp_path, rubrics):
    load = _load(tmp_path, rubrics, "r.csv", f"{HEAD},timestamp\nkg-001,ann,ckpt-0100,,4,4,4,4,4,2024\n")
    assert len(load.ratings) == 5 and any("'timestamp'" in p and "not read" in p for p in load.problems)


def test_rows_for_no_known_checkpoint_are_quarantined_rows_for_known_ones_wait_for_their_run(tmp_path, rubrics):
    """#36.14, 16: a blank checkpoint cell or an unknown checkpoint is quarantined; a file named after another
    known checkpoint is that checkpoint's, not a fault of this one."""
    folder = tmp_path / "kg_qa"
    folder.mkdir()
    (folder / "batch.csv").write_text(
        f"{HEAD}\nkg-001,ann,ckpt-0100,,4,4,4,4,4\nkg-002,ann,,,4,4,4,4,4\nkg-003,ann,ckpt-9999,,4,4,4,4,4\n"
        "kg-004,ann,ckpt-0200,,4,4,4,4,4\n"
    )
    (folder / "ckpt-0200.csv").write_text("sample_id,evaluator,relevance\nkg-001,bob,4\nkg-002,bob,5\n")
    (folder / "ckpt-0100.csv").write_text("sample_id,evaluator,checkpoint,relevance\nkg-003,bob,,4\n")
    known = {"ckpt-0100", "ckpt-0200"}
    load = load_ratings(rubrics["kg_qa"], "ckpt-0100", IDS, root=tmp_path, known_checkpoints=known)
    assert sorted(map(tuple, load.ratings[["sample_id", "evaluator"]].drop_duplicates().values)) == [
        ("kg-001", "ann"),
        ("kg-003", "bob"),
    ]
    reasons = dict(zip(load.quarantine.line_number, load.quarantine.reason))
    assert set(reasons) == {3, 4} and "blank" in reasons[3] and "'ckpt-9999' names no known checkpoint" in reasons[4]
    assert load.rows_other_checkpoints == 3  # kg-004 of batch.csv and the two rows of ckpt-0200.csv
    other = load_ratings(rubrics["kg_qa"], "ckpt-0200", IDS, root=tmp_path, known_checkpoints=known)
    assert len(other.ratings.drop_duplicates(["source_file", "line_number"])) == 3


def test_a_row_with_every_score_empty_is_quarantined_not_uncounted(tmp_path, rubrics):
    """#36.17."""
    load = _load(
        tmp_path, rubrics, "r.csv", f"{HEAD}\nkg-001,ann,ckpt-0100,just a note,,,,,\nkg-002,ann,ckpt-0100,,4,,,,\n"
    )
    assert list(load.ratings.sample_id) == ["kg-002"] and load.quarantine.reason.iloc[0].startswith("not rated yet: ")
    assert load.rows_read == 2


@pytest.mark.parametrize("name", ["ann smith", "ann@lab", "lab:ann", "ann+1"])
def test_evaluator_names_are_the_documented_alphabet(tmp_path, rubrics, name):
    load = _load(tmp_path, rubrics, "r.csv", f"{HEAD}\nkg-001,{name},ckpt-0100,,4,4,4,4,4\n")
    assert load.ratings.empty and "unsafe evaluator name" in load.quarantine.reason.iloc[0]


@pytest.mark.parametrize(
    "name, text, charged",
    [
        # a bad header, its rows naming ckpt-0100: ckpt-0100's file, refused there only
        ("late.csv", "sample_id,rater,checkpoint,relevance\nkg-001,ann,ckpt-0100,4\n", {"ckpt-0100"}),
        ("ckpt-0100_ann.csv", "sample_id,relevance\nkg-001,4\n", {"ckpt-0100"}),  # its name says whose it is
        # naming no checkpoint: it could hold anyone's ratings, so it counts against every one (fail closed)
        ("anon.csv", "sample_id,rater,relevance\nkg-001,ann,4\n", {"ckpt-0100", "ckpt-0300"}),
    ],
)
def test_a_file_refused_whole_counts_only_against_the_checkpoints_it_names(tmp_path, rubrics, name, text, charged):
    """#48: a rating file refused whole was charged to every checkpoint of the run, so an unrelated checkpoint was
    reported incomplete (exit 4)."""
    folder = tmp_path / "kg_qa"
    folder.mkdir(parents=True)
    (folder / name).write_text(text)
    known = {"ckpt-0100", "ckpt-0300"}
    for ckpt in sorted(known):
        load = load_ratings(rubrics["kg_qa"], ckpt, IDS, root=tmp_path, known_checkpoints=known)
        assert (len(load.quarantine) > 0) == (ckpt in charged), (ckpt, load.quarantine)
        assert any(name in p for p in load.problems)  # said on every run, charged where it belongs


def test_a_bad_cell_is_counted_once_beside_its_kept_row(tmp_path, rubrics):
    """#72: the verdict's count of rating rows: a row whose bad cell is quarantined and other ratings kept is one
    row, and one with something rejected; a row rejected whole is one more of each."""
    from eval_pipeline.core.contracts import QUARANTINE, Table
    from eval_pipeline.scoring.verdict import Verdict, _read_counts
    from eval_pipeline.storage.warehouse import Warehouse

    text = f"{HEAD}\nkg-001,ann,ckpt-0100,,9,4,x,4,4\nkg-002,ann,ckpt-0100,,4,4,4,4,4\nkg-003,ann,ckpt-0100,,9,,,,\n"
    load = _load(tmp_path, rubrics, "r.csv", text)
    assert sorted(load.quarantine.line_number) == [2, 2, 4]  # two bad cells of line 2; line 4 had nothing else
    wh = Warehouse(str(tmp_path / "w.duckdb"))
    where = {"checkpoint_id": "ckpt-0100"}
    with wh.partition_writer() as w:
        w.write(*QUARANTINE, load.quarantine, {"rubric": "kg_qa", **where, "stage": "ratings"})
        w.write("kg_qa", Table.HUMAN_RATINGS, load.ratings, where)
    v = Verdict("kg_qa", "ckpt-0100")
    with wh.session() as s:
        _read_counts(s, v, rubrics["kg_qa"], "ckpt-0100")
    assert (v.rating_rows, v.rating_rejected) == (3, 2), (v.rating_rows, v.rating_rejected)
