"""One step description: which model runs which step (phase, batch, length), in which dtypes, under
which fusion plan. With a deployment (roofline.parallel.deploy) it is everything a step's graph needs:

    step = describe_step("llama-3-70b", "decode", batch=64, seq=8192)
    graph = step.graph(deploy("dgx-h100", Split(tp=8)))

Inference (roofline.models.analysis.analyze), the split search (roofline.models.search) and serving
(roofline.serving) take the two values; nothing else resolves a model name, a default length or the
checkpoint's weights dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from roofline.frozen import frozen
from roofline.models.build import DEFAULT_PLAN, ModelGraph, as_phase, as_plan, build_graph
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes, for_checkpoint, model_dtypes
from roofline.models.transformer import ModelConfig
from roofline.parallel import Deployment
from roofline.vocab import Phase, Plan


@frozen
class Step:
    """One forward step: `seq` is the prompt length (prefill) or the context length (decode); `batch`
    the sequences over every replica; `dtypes` as the checkpoint stores its weights unless asked."""

    config: ModelConfig
    phase: Phase
    batch: int
    seq: int
    dtypes: ModelDtypes
    plan: Plan = DEFAULT_PLAN  # the headline fusion plan
    experts_hit: int | None = None  # MoE: distinct experts a layer reads (None: the uniform-routing expectation)

    def graph(self, deployment: Deployment) -> ModelGraph:
        """The step's graph on one device of the deployment (its share under the split)."""
        return build_graph(self.config, self.phase, self.batch, self.seq, self.dtypes, self.experts_hit,
                           deployment.split, deployment.graph_devices_per_node, deployment.nvls)

    def with_batch(self, batch: int) -> Step:
        return replace(self, batch=batch)


def describe_step(model: str | ModelConfig, phase: Phase | str = Phase.DECODE, batch: int = 1,
                  seq: int | None = None, dtypes: ModelDtypes | None = None, plan: Plan | str = DEFAULT_PLAN,
                  experts_hit: int | None = None, overrides: Mapping[str, str] | None = None) -> Step:
    """The step as asked: the model's config (a preset, a config.json path or a ModelConfig, with
    `overrides`), `seq` None as the default length (DEFAULT_LENGTH within max_position_embeddings), the
    weights dtype the checkpoint's where none is asked for."""
    headline = as_plan(plan)
    cfg = load_config(model, overrides)
    return Step(cfg, as_phase(phase), batch, cfg.length(seq),
                for_checkpoint(dtypes or model_dtypes(), cfg.weights_dtype, cfg.unquantized, cfg.mixed_weights),
                headline, experts_hit)


__all__ = ["Step", "describe_step"]
