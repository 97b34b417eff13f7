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

HEURISTIC = "heuristic"
IMPORTED = "imported"  # a judge the team already ran, its scores brought with the checkpoint (ingest.judged)


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
        if self.backend == IMPORTED:
            when = json.loads(self.params or "{}").get("judged_at")
            return f"{self.models} (imported, prompt {self.prompt_version}" + (f", judged {when})" if when else ")")
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
