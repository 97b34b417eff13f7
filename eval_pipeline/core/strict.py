"""The base of every rubric config model: unknown keys are errors, loaded models are immutable; and the check of a
field that names something (a lowercase identifier)."""

from pydantic import BaseModel, ConfigDict, field_validator

from eval_pipeline.core.ids import IDENTIFIER_RE


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def identifier_field(field: str, what: str) -> object:
    """A validator of ``field`` (assign it in the model's body): a lowercase identifier (letters, digits,
    underscore), else a ValueError naming ``what``."""

    def check(v: str) -> str:
        if not IDENTIFIER_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid {what} (lowercase letters, digits, underscore)")
        return v

    return field_validator(field)(check)
