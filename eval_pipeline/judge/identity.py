"""Who judged: the identity of a rubric's judge, recorded with every ``judge_scores`` partition.

Trust is a property of the judge, not of the checkpoint: two checkpoints' scores are only compared as a change of
model when the same identity judged both, and reliability measured against people carries forward to every
checkpoint the same identity judges. The identity is everything that changes what a judge answers: the backend,
the model(s), the endpoint (host and path; never credentials or query strings), the rubric's judge-prompt version,
the sampling parameters, where scores come from (expected over token probabilities, or the written score) and the
panel's composition. Its id is a short hash of all of it; its label is what a person reads.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from eval_pipeline.core import settings
from eval_pipeline.core.config import JudgeSpec, RubricConfig

HEURISTIC = "heuristic"


def endpoint_identity(url: str | None) -> str:
    """``scheme://host[:port]/path`` of an endpoint: no user, password, query or fragment."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}" if host else ""


@dataclass(frozen=True)
class JudgeIdentity:
    backend: str
    models: str  # the panel's models, in panel order, comma-separated
    endpoint: str
    prompt_version: str
    params: str  # JSON: per judge, the sampling parameters
    score_source: str
    panel: str  # JSON: the judges' names and the aggregate

    @property
    def id(self) -> str:
        canonical = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """What a person reads: ``heuristic (prompt 1a2b3c4d)`` or ``gpt-4o-mini @ host (prompt .., expected)``."""
        prompt = f"prompt {self.prompt_version[:8]}"
        if self.backend == HEURISTIC:
            return f"heuristic judge ({prompt})"
        host = urlsplit(self.endpoint).netloc if self.endpoint else "default endpoint"
        return f"{self.models} @ {host} ({prompt}, {self.score_source} scores)"

    def row(self, checkpoint_id: str) -> dict[str, str]:
        return {"checkpoint_id": checkpoint_id, "judge_identity": self.id, "label": self.label, **asdict(self)}


IDENTITY_COLUMNS = [
    "checkpoint_id",
    "judge_identity",
    "label",
    "backend",
    "models",
    "endpoint",
    "prompt_version",
    "params",
    "score_source",
    "panel",
]


def identity_of(rubric: RubricConfig, mode: str | None = None) -> JudgeIdentity:
    """The identity of the judge that scores ``rubric`` under ``mode`` (EVAL_JUDGE by default) now."""
    mode = (mode or settings.judge_env().mode).lower()
    panel = rubric.panel
    if mode == HEURISTIC:
        return JudgeIdentity(
            backend=HEURISTIC,
            models=HEURISTIC,
            endpoint="",
            prompt_version=rubric.judge_version,
            params="{}",
            score_source="chosen",
            panel=json.dumps({"judges": [HEURISTIC], "aggregate": panel.aggregate}),
        )
    specs = panel.judges or [JudgeSpec(name="default")]
    env = settings.judge_env()
    models, endpoints, params = [], [], {}
    for spec in specs:
        model = spec.model or env.model
        models.append(model)
        endpoints.append(spec.identity or endpoint_identity(spec.base_url or settings.openai_base_url()))
        params[spec.name] = {
            "model": model,
            "temperature": spec.temperature,
            "seed": spec.seed,
            "max_tokens": spec.max_tokens,
            "top_logprobs": spec.top_logprobs,
            **({"extra_body": spec.extra_body} if spec.extra_body else {}),
        }
    source = panel.score_source if any(s.top_logprobs for s in specs) else "chosen"
    return JudgeIdentity(
        backend=mode,
        models=", ".join(models),
        endpoint=", ".join(sorted(set(endpoints))) or endpoint_identity("https://api.openai.com/v1"),
        prompt_version=rubric.judge_version,
        params=json.dumps(params, sort_keys=True),
        score_source=source,
        panel=json.dumps({"judges": [s.name for s in specs], "aggregate": panel.aggregate}),
    )
