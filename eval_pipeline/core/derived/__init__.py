"""Derived scores, one kind per module of this package, registered by their ``kind``.

Adding a kind is one new module here: a :class:`DerivedKind` subclass decorated with
:func:`derived_kind`, with its fields, the scores it reads and how it computes. The
rubric config accepts every registered kind (a discriminated union built at import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypeVar, Union, get_args

from pydantic import Field

from eval_pipeline.core.derived.base import DerivedKind
from eval_pipeline.core.registry import Registry

KINDS: Registry[type[DerivedKind]] = Registry("derived-score kind", __name__, skip=("base", "apply"))
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


from eval_pipeline.core.derived.apply import DeclaresScores, apply_derived, per_rater  # noqa: E402 - after the union

__all__ = ["KINDS", "DeclaresScores", "DerivedScore", "apply_derived", "derived_kind", "per_rater"]
