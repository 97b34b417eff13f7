"""The base of every rubric config model: unknown keys are errors, loaded models are immutable."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
