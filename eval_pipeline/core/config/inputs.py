"""The input fields a raw sample (one JSONL object) must carry."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from eval_pipeline.core.strict import Strict, identifier_field

FieldType = Literal["string", "integer", "number", "boolean", "string_list", "object", "object_list"]


class InputField(Strict):
    """One field of a raw sample (a JSONL object)."""

    name: str = Field(description="Column name in the samples table.")
    path: str | None = Field(None, description="Dotted path in the JSON object; defaults to name.")
    type: FieldType = "string"
    required: bool = True
    description: str = ""
    allowed: list[Any] | None = Field(None, description="Allowed values (for string/integer fields).")
    min_length: int | None = Field(
        None, ge=0, description="Minimum length (characters or items); for strings the stripped text counts."
    )
    max_length: int | None = Field(None, ge=1)
    minimum: float | None = None
    maximum: float | None = None
    keys: list[str] | None = Field(None, description="Keys every object (or object in a list) must have.")

    _name_is_identifier = identifier_field("name", "column name")

    @property
    def json_path(self) -> list[str]:
        return (self.path or self.name).split(".")


class InputsSpec(Strict):
    id_field: str = "sample_id"
    response_field: str = Field(description="The model output under evaluation.")
    fields: list[InputField]

    @model_validator(mode="after")
    def _check_fields(self) -> InputsSpec:
        names = [f.name for f in self.fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate input field names: {dupes}")
        for special in (self.id_field, self.response_field):
            if special not in names:
                raise ValueError(f"{special!r} must be declared in fields")
        by_name = {f.name: f for f in self.fields}
        for special in (self.id_field, self.response_field):
            if by_name[special].type != "string" or not by_name[special].required:
                raise ValueError(f"{special!r} must be a required string field")
        return self

    def field(self, name: str) -> InputField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)
