"""GPT-2 (transformers models/gpt2): LayerNorm, learned positions, biases everywhere, a GELU MLP."""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig
from roofline.vocab import Norm


def gpt2(f: Fields, name: str, model_type: str) -> ModelConfig:
    hidden = f.integer("n_embd", None, "hidden_size")
    act = f.text("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu", "gelu_fast", "gelu_pytorch_tanh"):
        raise RooflineError(f"config {f.where}: activation_function {act!r} is not supported (GELU variants only)")
    positions = f.integer("n_positions", None, "max_position_embeddings")
    heads = f.integer("n_head", None, "num_attention_heads")
    if hidden % heads:
        raise RooflineError(f"config {f.where}: n_embd {hidden} is not a multiple of n_head {heads}")
    return ModelConfig(
        name=name, architecture=model_type, hidden_size=hidden,
        num_layers=f.integer("n_layer", None, "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=f.integer("n_inner", 4 * hidden),
        vocab_size=f.integer("vocab_size"), max_position_embeddings=positions,
        tie_word_embeddings=f.flag("tie_word_embeddings", True), norm=Norm.LAYERNORM, activation="gelu",
        linear_bias=True, learned_positions=positions)


PARSERS: dict[str, Parser] = {"gpt2": gpt2}
