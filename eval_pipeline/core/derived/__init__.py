"""Derived scores, one kind per module of this package, registered by their ``kind``.

Adding a kind is one new module here: a :class:`DerivedKind` subclass decorated with
:func:`derived_kind`, with its fields, the scores it reads and how it computes. The
rubric config accepts every registered kind (a discriminated union built at import).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Protocol, TypeVar, Union, get_args

import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived.base import DerivedKind
from eval_pipeline.core.registry import Registry

KINDS: Registry[type[DerivedKind]] = Registry("derived-score kind", __name__, skip=("base",))
K = TypeVar("K", bound=type[DerivedKind])


def derived_kind(cls: K) -> K:
    """Register a derived-score kind under the value of its ``kind`` literal."""
    (name,) = get_args(cls.model_fields["kind"].annotation)  # type: ignore[call-overload]
    cls.kind_name = name
    KINDS.add(name, cls)
    return cls


KINDS.load()  # now: the discriminated union below is built from every kind

# every registered kind, told apart by its `kind` (a Union built at run time; type checkers see the base class)
if TYPE_CHECKING:
    DerivedScore = DerivedKind
else:
    DerivedScore = Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]  # noqa: UP007


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


class DeclaresScores(Protocol):
    """What derived scores need of a rubric: its judged dimensions and its derived scores (``RubricConfig`` is
    one; named by what it has, since the rubric's config imports this module)."""

    @property
    def judged_dimensions(self) -> Sequence[_Keyed]: ...

    @property
    def derived(self) -> Sequence[DerivedKind]: ...


def apply_derived(rubric: DeclaresScores, df: pd.DataFrame) -> pd.DataFrame:
    """Add every derived score the rubric declares to ``df``, in declaration order."""
    judged = [d.key for d in rubric.judged_dimensions]
    for s in rubric.derived:
        df[s.name] = s.apply(df, judged)
    return df


def per_rater(rubric: DeclaresScores, ratings: pd.DataFrame, score: str, items: list[str]) -> pd.DataFrame:
    """One score (a rated dimension or a score derived from them) of each rater: items x evaluators, from
    long ratings (one row per item, evaluator and dimension). Dimensions nobody rated count as missing."""
    wide = ratings.pivot_table(
        index=[*items, "evaluator"], columns="dimension", values="score", aggfunc="first"
    ).reset_index()
    wide.columns.name = None
    for d in rubric.judged_dimensions:
        if d.key not in wide.columns:
            wide[d.key] = float("nan")
    wide = apply_derived(rubric, wide)
    return wide.pivot_table(index=items, columns="evaluator", values=score, aggfunc="first")
