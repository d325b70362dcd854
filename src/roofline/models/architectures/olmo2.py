"""OLMo 2 (`olmo2`; OLMo 2, arXiv 2501.00656; transformers models/olmo2, vLLM olmo2.py): Llama's shape with
two changes. q and k are RMSNormed over the whole projection, q_norm over H·d and k_norm over G·d
gains (Olmo2Attention; as MiniMax-M2's, not one norm per head), and the block norms come after
attention and after the MLP, on their outputs before each residual add (post_attention_layernorm,
post_feedforward_layernorm), with no norm before them. The same two RMSNorms a layer over the same
[N, h] rows as a pre-norm block: the same parameters, FLOPs and bytes, placed after instead of
before. `attention_bias` puts a bias on q, k, v and o.
"""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def olmo2(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)
    kw["qk_norm"] = kw["qk_norm_per_layer"] = True
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"olmo2": olmo2}
