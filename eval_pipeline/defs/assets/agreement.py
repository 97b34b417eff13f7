"""Agreement: human-human and judge-human statistics per dimension, for this checkpoint and for all."""

import dagster as dg
import pandas as pd

from eval_pipeline.agreement.compute import compute_agreement, judge_pairs, predictions_on_human_scale, rater_sets
from eval_pipeline.agreement.length_bias import length_bias, log_words
from eval_pipeline.agreement.ppi import calibrated_means
from eval_pipeline.agreement.trust import OVERALL, trust_rows
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import ALL_CHECKPOINTS, JUDGE_VS_HUMAN_MEAN, Table
from eval_pipeline.defs.asset import (
    asset_key,
    panel_on_human_scale,
    partition_rows,
    recorded_judge,
    required_rows,
    rounded,
    rubric_asset,
    viewer_link,
)
from eval_pipeline.defs.assets.pools import ACTIVE, lineage_parent
from eval_pipeline.defs.automation import REDECIDE
from eval_pipeline.defs.queries import rated_panel_scores
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.storage.warehouse import Warehouse


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


def _judge_trust(
    wh: Warehouse,
    rubric: RubricConfig,
    ckpt_id: str,
    own: pd.DataFrame,
    pool: pd.DataFrame,
    all_ratings: pd.DataFrame,
    all_judge: pd.DataFrame,
    overall: pd.DataFrame,
) -> pd.DataFrame | None:
    """The verdict on this checkpoint's judge identity from its pooled calibration set: every rated sample of every
    checkpoint the same identity judged (agreement.trust); None before the judge recorded who it is. ``overall``:
    the agreement over every checkpoint's rows, which is the pooled set's when one judge scored them all."""
    who = recorded_judge(wh, rubric, ckpt_id)
    if who is None:
        return None
    identity, label = who
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
        pooled = overall  # the same rows: computed once
    else:
        pooled = compute_agreement(rubric, f"judge:{identity}", ratings, judge)
    rated_ckpts = int(ratings.checkpoint_id.nunique()) if len(ratings) else 0
    pairs = judge_pairs(rubric, ratings, judge)
    weights = _pooled_weights(mine)
    frames = _frames(wh, rubric, same, mine) if weights is not None else None
    return trust_rows(rubric, ckpt_id, identity, label, pooled, own, rated_ckpts, pairs, weights, frames)


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
    wh: Warehouse, rubric: RubricConfig, ckpt_id: str, ratings: pd.DataFrame, design: dict[str, float] | None
) -> pd.DataFrame:
    """The judge's means corrected by this checkpoint's human ratings (PPI++, agreement.ppi; weighted by the
    inclusion probabilities ``design`` where people rated by the active queue)."""
    humans = rater_sets(rubric, ratings)["human"] if len(ratings) else ratings
    return calibrated_means(ckpt_id, panel_on_human_scale(wh, rubric, [ckpt_id]), humans, design)


def agreement_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    deps = [asset_key(rubric, Table.HUMAN_RATINGS), asset_key(rubric, Table.CALIBRATION_POOL)]
    deps += [asset_key(rubric, Table.JUDGE_SCORES)] if has_judge else []

    @rubric_asset(
        rubric,
        Table.AGREEMENT,
        deps=deps,
        kinds={"duckdb"},
        automation_condition=REDECIDE,
        description="Agreement per dimension, and the verdict on the judge (judge_trust: pooled over every rated "
        "sample its identity judged): percent agreement, Cohen's kappa (unweighted, linear, quadratic over the "
        "full scale), Fleiss' kappa, Krippendorff's alpha (nominal, ordinal, interval), ICC (absolute, consistency); "
        "judge vs humans: Spearman, Kendall, MAE, bias and kappa; prevalence and ceiling share beside every kappa. "
        f"Rows for this checkpoint and, refreshed on every run, for {ALL_CHECKPOINTS} checkpoints.",
    )
    def agreement(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        ratings = required_rows(wh, rubric, Table.HUMAN_RATINGS, ckpt_id)
        pool = _pool(wh, rubric)
        all_ratings, all_judge = _pooled_inputs(wh, rubric, pool, has_judge)
        judge = all_judge[all_judge.checkpoint_id == ckpt_id] if all_judge is not None else None
        df = compute_agreement(rubric, ckpt_id, ratings, judge)
        overall = compute_agreement(rubric, ALL_CHECKPOINTS, all_ratings, all_judge)
        trust = (
            _judge_trust(wh, rubric, ckpt_id, df, pool, all_ratings, all_judge, overall)
            if all_judge is not None
            else None
        )
        calibrated = _calibrated(wh, rubric, ckpt_id, ratings, _design(pool, ckpt_id)) if has_judge else None
        with wh.partition_writer() as w:  # the checkpoint's rows and the pooled ones in one transaction
            w.write(rubric.name, Table.AGREEMENT, df, {"checkpoint_id": ckpt_id})
            w.write(rubric.name, Table.AGREEMENT, overall, {"checkpoint_id": ALL_CHECKPOINTS})
            if trust is not None:
                w.write(rubric.name, Table.JUDGE_TRUST, trust, {"checkpoint_id": ckpt_id})
            if calibrated is not None:
                w.write(rubric.name, Table.CALIBRATED_MEANS, calibrated, {"checkpoint_id": ckpt_id})
        quadratic = df[df.statistic == "cohen_kappa_quadratic"]
        judged = _kappas(quadratic[quadratic.raters == JUDGE_VS_HUMAN_MEAN])
        verdict = trust[trust.dimension == OVERALL].iloc[0] if trust is not None else None
        return dg.MaterializeResult(
            metadata={
                "judge_trust": dg.MetadataValue.text(
                    f"{verdict.verdict} ({verdict.judge_label})" if verdict is not None else "no judge identity"
                ),
                # judge vs human mean per dimension as numbers (the Plots tab draws them across checkpoints)
                **{f"judge_human_kappa_{dim}": dg.MetadataValue.float(v) for dim, v in judged.items()},
                "rows": dg.MetadataValue.int(len(df)),
                "judge_human_kappa_quadratic": dg.MetadataValue.json(judged),
                "human_human_kappa_quadratic": dg.MetadataValue.json(
                    _kappas(quadratic[quadratic.raters != JUDGE_VS_HUMAN_MEAN])
                ),
            }
        )

    return agreement


def _log_words(wh: Warehouse, rubric: RubricConfig, ckpt_id: str) -> pd.Series:
    sid, resp = rubric.inputs.id_field, rubric.inputs.response_field
    df = wh.read(rubric.name, Table.SAMPLES, columns=(sid, resp), where={"checkpoint_id": ckpt_id})
    df = df.set_axis(["sample_id", "response"], axis=1)
    return pd.Series(log_words(df.response).to_numpy(), index=df.sample_id)


def length_bias_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    deps = [asset_key(rubric, t) for t in ("samples", "scores", "human_ratings", Table.CHECKPOINT_LINEAGE)]

    @rubric_asset(
        rubric,
        Table.LENGTH_BIAS,
        deps=deps,
        kinds={"duckdb"},
        automation_condition=REDECIDE,
        description="Does the judge lean on length more than people do? Per judged dimension and the headline: "
        "Spearman of the judge's score with the response's length, the same for the human mean on the rated "
        "samples and the gap with a paired bootstrap CI (flagged when wholly above zero), and a length-controlled "
        "mean (the score's log-length slope taken out at the parent's mean length, as AlpacaEval's "
        "length-controlled win rate does).",
    )
    def length_bias_(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        scores = required_rows(wh, rubric, Table.SCORES, ckpt_id)
        lengths = _log_words(wh, rubric, ckpt_id)
        parent = lineage_parent(wh, rubric, ckpt_id)
        reference = None
        if parent is not None:
            ref = _log_words(wh, rubric, parent)
            reference = float(ref.mean()) if len(ref) else None
        ratings = partition_rows(wh, rubric, Table.HUMAN_RATINGS, ckpt_id)
        humans = rater_sets(rubric, ratings)["human"] if ratings is not None else pd.DataFrame()
        means = {d: g.groupby("sample_id").score.mean() for d, g in humans.groupby("dimension")} if len(humans) else {}
        names = [d.key for d in rubric.judged_dimensions]
        names += [rubric.headline] if rubric.headline not in names else []
        df = length_bias(ckpt_id, scores, lengths, means, names, reference)
        wh.replace_partition(rubric.name, Table.LENGTH_BIAS, df, {"checkpoint_id": ckpt_id})
        metadata: dict[str, dg.MetadataValue] = {
            "flagged": dg.MetadataValue.text(", ".join(df[df.flagged].score) or "none"),
            "viewer": viewer_link(rubric, ckpt_id),
        }
        for r in df.itertuples():
            metadata[f"length_rho_{r.score}"] = rounded(r.judge_length_rho)
        head = df[df.score == rubric.headline]
        if len(head):
            metadata["headline_length_controlled"] = rounded(head.length_controlled_mean.iloc[0])
        return dg.MaterializeResult(metadata=metadata)

    return length_bias_
