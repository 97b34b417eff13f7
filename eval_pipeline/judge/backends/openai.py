"""Any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY): each judge of the rubric's panel asks the
model through the cached, metered, adaptive client (judge.llm_rows, judge.cached, judge.calls, judge.client);
expected scores from token probabilities where the judge asks for them (judge.logprobs)."""

from __future__ import annotations

import json

from eval_pipeline.core.config import JudgeSpec, RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Row
from eval_pipeline.judge.backends import BACKENDS
from eval_pipeline.judge.backends.base import JudgedAt, Judging
from eval_pipeline.judge.identity import JudgeIdentity, endpoint_identity
from eval_pipeline.judge.llm_rows import judge_rows

OPENAI = "openai"


@BACKENDS.register(OPENAI)
class OpenAIBackend:
    calls_out = True

    def identity(self, rubric: RubricConfig, config: JudgeConfig, at: JudgedAt | None = None) -> JudgeIdentity:
        panel = rubric.panel
        specs = panel.judges or [JudgeSpec(name="default")]
        models, endpoints, params = [], [], {}
        for spec in specs:
            model = spec.model or config.model
            models.append(model)
            endpoints.append(spec.identity or endpoint_identity(spec.base_url or config.base_url))
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
            backend=OPENAI,
            models=", ".join(models),
            endpoint=", ".join(sorted(set(endpoints))) or endpoint_identity("https://api.openai.com/v1"),
            prompt_version=rubric.judge_version,
            params=json.dumps(params, sort_keys=True),
            score_source=source,
            panel=json.dumps({"judges": [s.name for s in specs], "aggregate": panel.aggregate}),
        )

    def score(self, job: Judging) -> list[Row]:
        rubric, ckpt, records, wh, stats, config, repeat = job.unpacked()
        specs = rubric.panel.judges or [JudgeSpec(name="default")]
        stats.judges = [s.name for s in specs]
        stats.judge_kind = "llm"
        rows: list[Row] = []
        for spec in specs:
            settings = config.for_judge(spec)
            rows += judge_rows(rubric, ckpt, settings, records, wh, stats, repeat)
        return rows
