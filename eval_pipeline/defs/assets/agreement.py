"""Agreement: human-human and judge-human statistics per dimension, for this checkpoint and for all."""

import functools
from collections.abc import Callable

import dagster as dg
import pandas as pd

from eval_pipeline.agreement.compute import compute_agreement, judge_pairs, predictions_on_human_scale, rater_sets
from eval_pipeline.agreement.length_bias import length_bias, log_words
from eval_pipeline.agreement.ppi import calibrated_means
from eval_pipeline.agreement.trust import OVERALL, PooledTrust, checkpoints_trust, pooled_trust
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import ALL_CHECKPOINTS, BETWEEN_PEOPLE, JUDGE_VS_HUMAN_MEAN, Table
from eval_pipeline.defs.asset import (
    asset_key,
    decision_asset,
    rounded,
)
from eval_pipeline.defs.assets.decisions import Inputs, Part, Prefetched, commit, commit_table, decided_metadata, part
from eval_pipeline.defs.assets.pools import ACTIVE, across
from eval_pipeline.defs.queries import rated_panel_scores
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring.compared import panel_on_human_scale
from eval_pipeline.storage import versions
from eval_pipeline.storage.warehouse import Reader, Warehouse


def _kappas(df: pd.DataFrame) -> dict[str, float]:
    return {r.dimension: round(r.value, 3) for r in df.itertuples() if r.value == r.value}


def _pool(wh: Warehouse, rubric: RubricConfig) -> pd.DataFrame:
    """The calibration pool as its asset last wrote it (defs/assets/pools.py)."""
    return wh.read(rubric.name, Table.CALIBRATION_POOL)


def _pooled_inputs(
    wh: Warehouse, rubric: RubricConfig, pool: pd.DataFrame, has_judge: bool
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Every pooled checkpoint's ratings, and the panel's judge_scores rows of the samples the pool holds: agreement
    needs no other (a 100k-sample checkpoint has about 1,000 rated)."""
    members = set(pool.checkpoint_id.astype(str))
    ratings = wh.read(rubric.name, Table.HUMAN_RATINGS)
    ratings = ratings[ratings.checkpoint_id.isin(members)]
    if not has_judge:
        return ratings, None
    judge = rated_panel_scores(wh, rubric.name)
    pairs = pd.MultiIndex.from_frame(pool[["checkpoint_id", "sample_id"]].astype(str))
    rated = pd.MultiIndex.from_frame(judge[["checkpoint_id", "sample_id"]].astype(str)).isin(pairs)
    return ratings, judge[rated]


def _identity_trust(
    wh: Warehouse,
    rubric: RubricConfig,
    identity: str,
    label: str,
    pool: pd.DataFrame,
    all_ratings: pd.DataFrame,
    all_judge: pd.DataFrame,
    overall: Callable[[], pd.DataFrame],
) -> PooledTrust:
    """The pooled part of the verdict on one judge identity: every rated sample of every checkpoint it judged
    (agreement.trust), computed once for all its checkpoints. ``overall``: the agreement over every checkpoint's
    rows (computed when first asked), which is the pooled set's when one judge scored them all."""
    mine = pool[pool.judge_identity == identity]
    same = set(mine.checkpoint_id.astype(str))
    ratings = all_ratings[all_ratings.checkpoint_id.isin(same)]
    judge = all_judge[all_judge.checkpoint_id.isin(same)]
    if "tuned_on" in mine.columns and mine.tuned_on.notna().any():  # an aligned judge: never decided on its tuning
        tuned = pd.MultiIndex.from_frame(mine[mine.tuned_on.notna()][["checkpoint_id", "sample_id"]].astype(str))
        ratings = ratings[~_pairs_of(ratings).isin(tuned)]
        judge = judge[~_pairs_of(judge).isin(tuned)]
        mine = mine[mine.tuned_on.isna()]
    if len(ratings) == len(all_ratings) and len(judge) == len(all_judge):
        pooled = overall()  # the same rows: computed once
    else:
        pooled = compute_agreement(rubric, f"judge:{identity}", ratings, judge)
    rated_ckpts = int(ratings.checkpoint_id.nunique()) if len(ratings) else 0
    pairs = judge_pairs(rubric, ratings, judge)
    weights = _pooled_weights(mine)
    frames = _frames(wh, rubric, same, mine) if weights is not None else None
    return pooled_trust(rubric, identity, label, pooled, rated_ckpts, pairs, weights, frames)


def _frames(wh: Warehouse, rubric: RubricConfig, checkpoints: set[str], pool: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per dimension, every sample the identity judged in the pooled checkpoints, with the judge's score and its
    prediction of people's score (the frame the active queue's ratings are weighted back to); samples an aligned
    judge was tuned on are not in it (``pool``: the identity's rows, tuned ones already left out)."""
    cols = ("checkpoint_id", "sample_id", "judge", "kind", "dimension", "score", "score_distribution")
    judged = wh.read(rubric.name, Table.JUDGE_SCORES, columns=cols, where={"checkpoint_id": tuple(sorted(checkpoints))})
    frames = predictions_on_human_scale(rubric, judged)
    tuned = set(rubric.aligned.tuned_on) if rubric.aligned else set()
    if not tuned:
        return frames
    return {d: f[~(f.checkpoint_id.astype(str) + "/" + f.sample_id.astype(str)).isin(tuned)] for d, f in frames.items()}


def _pairs_of(df: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_frame(df[["checkpoint_id", "sample_id"]].astype(str))


def _pooled_weights(pool: pd.DataFrame) -> pd.Series | None:
    """Every pooled item's inverse inclusion probability, by (checkpoint_id, sample_id), when some checkpoint's
    ratings were drawn by the active queue: its items by the queue's probabilities (an item past the queue's first
    unrated one left out), every other checkpoint's as a random sample (rated / judged samples). None when none
    was: every item alike, as the table's statistics."""
    if not (pool.design == ACTIVE).any():
        return None
    drawn = pool[pool.inclusion.notna()]
    return pd.Series(
        (1.0 / drawn.inclusion).to_numpy(), index=pd.MultiIndex.from_frame(drawn[["checkpoint_id", "sample_id"]])
    ).rename(None)


def _design(pool: pd.DataFrame, ckpt_id: str) -> dict[str, float] | None:
    """This checkpoint's rated samples' inclusion probabilities when people rated by the active queue, else None."""
    mine = pool[(pool.checkpoint_id == ckpt_id) & (pool.design == ACTIVE) & pool.inclusion.notna()]
    return {str(s): float(p) for s, p in zip(mine.sample_id, mine.inclusion)} or None


def _calibrated(
    wh: Reader,
    rubric: RubricConfig,
    ckpt_id: str,
    ratings: pd.DataFrame,
    design: dict[str, float] | None,
) -> pd.DataFrame:
    """The judge's means corrected by this checkpoint's human ratings (PPI++, agreement.ppi; weighted by the
    inclusion probabilities ``design`` where people rated by the active queue)."""
    humans = rater_sets(rubric, ratings)["human"] if len(ratings) else ratings
    return calibrated_means(ckpt_id, panel_on_human_scale(wh, rubric, [ckpt_id]), humans, design)


def agreement_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    tables = [Table.HUMAN_RATINGS] + ([Table.JUDGE_SCORES] if has_judge else [])
    # the lineage: the checkpoints there are (decisions.Inputs)
    deps: list[dg.AssetKey | dg.AssetDep] = [
        *across(rubric, *tables),
        asset_key(rubric, Table.CALIBRATION_POOL),
        asset_key(rubric, Table.CHECKPOINT_LINEAGE),
    ]

    @decision_asset(
        rubric,
        Table.AGREEMENT,
        deps,
        all_checkpoints=ALL_CHECKPOINTS,
    )
    def agreement(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        """Agreement per dimension for every checkpoint, and the verdict on the judge (judge_trust: pooled over every
        rated sample its identity judged, decided once per identity): percent agreement, Cohen's kappa (unweighted,
        linear, quadratic over the full scale), Fleiss' kappa, Krippendorff's alpha (nominal, ordinal, interval), ICC
        (absolute, consistency); judge vs humans: Spearman, Kendall, MAE, bias and kappa; prevalence and ceiling share
        beside every kappa; rows for each checkpoint and for {all_checkpoints} checkpoints. A checkpoint is decided
        again only when its own ratings or judge scores changed (its agreement, calibrated means) or the pool did (its
        judge_trust)."""
        wh = warehouse.get()
        d = Inputs(wh, rubric)
        ckpts = [c for c in d.checkpoints if d.has(Table.HUMAN_RATINGS, c)]
        pool = _pool(wh, rubric)
        designs = {str(c): versions.frame_version(g) for c, g in pool.groupby("checkpoint_id")}
        own_fp = {
            c: d.fingerprint(d.own(c, Table.HUMAN_RATINGS, Table.JUDGE_SCORES), designs.get(c, versions.ABSENT))
            for c in ckpts
        }
        members = sorted(designs)
        pool_fp = d.fingerprint(
            versions.frame_version(pool), [d.own(c, Table.HUMAN_RATINGS, Table.JUDGE_SCORES) for c in members]
        )
        who = _identities(wh, rubric) if has_judge else {}
        trust_fp = {c: d.fingerprint(pool_fp, own_fp[c], who.get(c)) for c in ckpts if c in who}
        own_todo, trust_todo = d.todo(Table.AGREEMENT, own_fp), d.todo(Table.JUDGE_TRUST, trust_fp)
        pooled_todo = d.stored(POOLED, ALL_CHECKPOINTS) != pool_fp
        if not (own_todo or trust_todo or pooled_todo):
            return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), []))
        all_ratings, all_judge = _pooled_inputs(wh, rubric, pool, has_judge)
        reader = Prefetched(wh, sorted(set(own_todo) | set(trust_todo)))
        own: dict[str, pd.DataFrame] = {}
        calibrated: dict[str, pd.DataFrame] = {}
        for c in own_todo:
            ratings = reader.read(rubric.name, Table.HUMAN_RATINGS, where={"checkpoint_id": c})
            judge = all_judge[all_judge.checkpoint_id == c] if all_judge is not None else None
            own[c] = compute_agreement(rubric, c, ratings, judge)
            if has_judge:
                calibrated[c] = _calibrated(reader, rubric, c, ratings, _design(pool, c))
        overall = functools.cache(lambda: compute_agreement(rubric, ALL_CHECKPOINTS, all_ratings, all_judge))
        parts = [part(rubric.name, Table.AGREEMENT, own_todo, own)]
        if pooled_todo:  # the rows over every checkpoint: their inputs changed
            parts.append((rubric.name, Table.AGREEMENT, {"checkpoint_id": ALL_CHECKPOINTS}, [overall()]))
        if calibrated:
            parts.append(part(rubric.name, Table.CALIBRATED_MEANS, own_todo, calibrated))
        trust: dict[str, pd.DataFrame] = {}  # per judge identity: the trust rows of its checkpoints decided now
        if all_judge is not None and trust_todo:
            trust, more = _trust(
                wh, rubric, d, reader, pool, pool_fp, who, trust_todo, own, all_ratings, all_judge, overall
            )
            parts += more
        decided = {
            Table.AGREEMENT: {c: own_fp[c] for c in own_todo},
            Table.JUDGE_TRUST: {c: trust_fp[c] for c in trust_todo},
        }
        commit(wh, rubric, {**decided, POOLED: {ALL_CHECKPOINTS: pool_fp}}, parts)
        return dg.MaterializeResult(metadata=_metadata(rubric, ckpts, own_todo, trust_todo, own, trust))

    return agreement


def _trust(
    wh: Warehouse,
    rubric: RubricConfig,
    d: Inputs,
    reader: Prefetched,
    pool: pd.DataFrame,
    pool_fp: str,
    who: dict[str, tuple[str, str]],
    trust_todo: list[str],
    own: dict[str, pd.DataFrame],
    all_ratings: pd.DataFrame,
    all_judge: pd.DataFrame,
    overall: Callable[[], pd.DataFrame],
) -> tuple[dict[str, pd.DataFrame], list[Part]]:
    """The trust rows of the checkpoints ``trust_todo`` (per judge identity), and what to write: each identity's
    pooled trust computed once (kept while the pool is unchanged), set beside each checkpoint's own agreement."""
    parts: list[Part] = []
    stored = reader.read(rubric.name, Table.AGREEMENT, where={"checkpoint_id": tuple(trust_todo)})
    stored_by = {str(c): g for c, g in stored.groupby("checkpoint_id", sort=False)} if len(stored) else {}
    pooled: dict[str, PooledTrust] = {}
    kept = versions.read_pooled(wh, rubric.name)  # each identity's pooled trust, as last computed
    fresh: dict[str, tuple[str, str]] = {}
    owns: dict[str, dict[str, pd.DataFrame]] = {}  # identity -> checkpoint -> its own agreement
    for c in trust_todo:
        identity, label = who[c]
        if identity not in pooled:
            key = d.fingerprint(pool_fp, identity, label)
            if kept.get(identity, ("", ""))[0] == key:  # the pool unchanged: not computed again
                pooled[identity] = PooledTrust.from_json(kept[identity][1])
            else:
                pooled[identity] = _identity_trust(wh, rubric, identity, label, pool, all_ratings, all_judge, overall)
                fresh[identity] = (key, pooled[identity].to_json())
        owns.setdefault(identity, {})[c] = own[c] if c in own else stored_by.get(c, stored.iloc[:0])
    trust = {i: checkpoints_trust(rubric, pooled[i], by) for i, by in owns.items()}
    parts.append(part(rubric.name, Table.JUDGE_TRUST, trust_todo, trust))
    if fresh:
        where = {"schema_name": rubric.name, "judge_identity": tuple(sorted(fresh))}
        parts.append((*versions.POOLED, where, [versions.pooled_rows(rubric.name, fresh)]))
    return trust, parts


POOLED = "agreement_pooled"  # decision_inputs: what the rows over every checkpoint were computed from


def _identities(wh: Warehouse, rubric: RubricConfig) -> dict[str, tuple[str, str]]:
    """Each checkpoint's judge (identity, label) as ``<rubric>.judge_identity`` recorded it (one query)."""
    if not wh.table_exists(rubric.name, Table.JUDGE_IDENTITY):
        return {}
    ids = wh.read(rubric.name, Table.JUDGE_IDENTITY, columns=("checkpoint_id", "judge_identity", "label"))
    return {str(r.checkpoint_id): (str(r.judge_identity), str(r.label)) for r in ids.itertuples()}


def _metadata(
    rubric: RubricConfig,
    ckpts: list[str],
    own_todo: list[str],
    trust_todo: list[str],
    own: dict[str, pd.DataFrame],
    trust: dict[str, pd.DataFrame],
) -> dict[str, dg.MetadataValue]:
    """What the step decided, and the newest decided checkpoint's figures (the Plots tab draws them)."""
    done = sorted(set(own_todo) | set(trust_todo))
    extra: dict[str, dg.MetadataValue] = {}
    if trust:
        rows = pd.concat(trust.values())
        last = rows[rows.checkpoint_id == max(rows.checkpoint_id)]
        verdict = last[last.dimension == OVERALL].iloc[0]
        extra["judge_trust"] = dg.MetadataValue.text(f"{verdict.verdict} ({verdict.judge_label})")
    if own:
        df = own[max(own)]
        quadratic = df[df.statistic == "cohen_kappa_quadratic"]
        extra["judge_human_kappa_quadratic"] = dg.MetadataValue.json(
            _kappas(quadratic[quadratic.raters == JUDGE_VS_HUMAN_MEAN])
        )
        extra["human_human_kappa_quadratic"] = dg.MetadataValue.json(  # people with people only (#72)
            _kappas(quadratic[quadratic["between"] == BETWEEN_PEOPLE])
        )
    return decided_metadata(len(ckpts), done, **extra)


def _log_words(wh: Reader, rubric: RubricConfig, ckpt_id: str) -> pd.Series:
    sid, resp = rubric.inputs.id_field, rubric.inputs.response_field
    df = wh.read(rubric.name, Table.SAMPLES, columns=(sid, resp), where={"checkpoint_id": ckpt_id})
    df = df.set_axis(["sample_id", "response"], axis=1)
    return pd.Series(log_words(df.response).to_numpy(), index=df.sample_id)


def _length_bias_of(reader: Prefetched, rubric: RubricConfig, ckpt_id: str, parent: str | None) -> pd.DataFrame:
    """One checkpoint's length-bias rows (agreement.length_bias), its parent's mean length as the reference."""
    scores = reader.read(rubric.name, Table.SCORES, where={"checkpoint_id": ckpt_id})
    lengths = _log_words(reader, rubric, ckpt_id)
    reference = None
    if parent is not None:
        ref = _log_words(reader, rubric, parent)
        reference = float(ref.mean()) if len(ref) else None
    ratings = reader.read(rubric.name, Table.HUMAN_RATINGS, where={"checkpoint_id": ckpt_id})
    humans = rater_sets(rubric, ratings)["human"] if len(ratings.columns) else pd.DataFrame()
    means = {d: g.groupby("sample_id").score.mean() for d, g in humans.groupby("dimension")} if len(humans) else {}
    names = [d.key for d in rubric.judged_dimensions]
    names += [rubric.headline] if rubric.headline not in names else []
    return length_bias(ckpt_id, scores, lengths, means, names, reference)


def length_bias_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    deps: list[dg.AssetKey | dg.AssetDep] = [*across(rubric, Table.SAMPLES, Table.SCORES, Table.HUMAN_RATINGS)]
    deps.append(asset_key(rubric, Table.CHECKPOINT_LINEAGE))

    @decision_asset(
        rubric,
        Table.LENGTH_BIAS,
        deps,
    )
    def length_bias_(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        """Does the judge lean on length more than people do? Per checkpoint, judged dimension and the headline:
        Spearman of the judge's score with the response's length, the same for the human mean on the rated samples and
        the gap with a paired bootstrap CI (flagged when wholly above zero), and a length-controlled mean (the score's
        log-length slope taken out at the parent's mean length, as AlpacaEval's length-controlled win rate does). A
        checkpoint is decided again only when its scores, samples or ratings, or its parent's samples, changed."""
        wh = warehouse.get()
        d = Inputs(wh, rubric)
        ckpts = [c for c in d.checkpoints if d.has(Table.SCORES, c)]
        fp = {
            c: d.fingerprint(
                d.own(c, Table.SCORES, Table.SAMPLES, Table.HUMAN_RATINGS), d.parent(c), d.v(Table.SAMPLES, d.parent(c))
            )
            for c in ckpts
        }
        todo = d.todo(Table.LENGTH_BIAS, fp)
        if not todo:
            return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), []))
        reader = Prefetched(wh, d.with_parents(todo))
        frames = {c: _length_bias_of(reader, rubric, c, d.parent(c)) for c in todo}
        commit_table(wh, rubric, Table.LENGTH_BIAS, fp, frames)
        df = frames[todo[-1]]
        metadata: dict[str, dg.MetadataValue] = {
            "flagged": dg.MetadataValue.text(", ".join(df[df.flagged].score) or "none")
        }
        head = df[df.score == rubric.headline]
        if len(head):
            metadata["headline_length_controlled"] = rounded(head.length_controlled_mean.iloc[0])
        return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), todo, **metadata))

    return length_bias_
