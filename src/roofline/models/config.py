"""Transformer configs: a Hugging Face `config.json` (or a preset, which is one) in, a ModelConfig out.

Nothing is downloaded. A config comes from a file, a model folder holding `config.json`, or a preset
under `presets/` (one JSON file each, shaped like the model's own `config.json`). One parser per
`model_type` reads the fields that architecture uses; a missing field is named, an unknown
architecture lists the supported ones.

Parameter counts are derived from the config alone (`ModelConfig.param_counts`): embeddings, the
attention and MLP weights of every layer, norm gains and biases. "Active" parameters are those one
token uses: for a mixture of experts, the router, the shared experts and `experts_per_token` routed
experts instead of all of them; embeddings and the LM head are included, as the published figures
include them (Mixtral 8x7B: 12.9B active).

Layering: imports roofline.errors only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError, unknown

PRESETS_DIR = Path(__file__).parent / "presets"

# layer kinds: which attention a layer runs (full causal, or a sliding window) and which MLP
GLOBAL = "global"
LOCAL = "local"
DENSE = "dense"
MOE = "moe"


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer: everything the graph builder and the counts need."""

    name: str
    architecture: str  # the HF model_type it came from
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (0 if every layer is MoE)
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    norm: str = "rmsnorm"  # "rmsnorm" | "layernorm" (LayerNorm has a bias too)
    activation: str = "swiglu"  # "swiglu" | "geglu" (gated) | "gelu" (GPT-2: up, gelu, down)
    qkv_bias: bool = False  # Qwen2: biases on q, k, v
    o_bias: bool = False  # Llama/Qwen3 attention_bias: a bias on o_proj as well as on q, k, v
    linear_bias: bool = False  # GPT-2: biases on every linear layer
    qk_norm: bool = False  # Qwen3, Gemma 3: RMSNorm over each head of q and k
    sandwich_norm: bool = False  # Gemma 2/3: norms after attention and after the MLP as well
    learned_positions: int = 0  # GPT-2: rows of the learned position table (0: RoPE)
    sliding_window: int | None = None
    # per layer GLOBAL or LOCAL; empty: every layer alike (LOCAL if there is a window). See layer_kinds.
    layer_attention: tuple[str, ...] = ()
    # mixture of experts
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0  # each of moe_intermediate_size width
    first_dense_layers: int = 0  # DeepSeek-V3: the first k layers have a dense MLP
    router_bias: bool = False  # DeepSeek-V3: e_score_correction_bias
    # multi-head latent attention (DeepSeek-V3); kv_lora_rank > 0 turns it on
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    source: str = ""  # preset name or file path

    def __post_init__(self) -> None:
        for label in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "vocab_size",
                      "max_position_embeddings"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RooflineError(f"model {self.name}: {label} must be a positive integer, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise RooflineError(f"model {self.name}: num_attention_heads ({self.num_heads}) must be a multiple "
                                f"of num_key_value_heads ({self.num_kv_heads})")
        if self.is_moe and not (0 < self.experts_per_token <= self.num_experts and self.moe_intermediate_size > 0):
            raise RooflineError(f"model {self.name}: experts_per_token must be in 1..num_experts and "
                                f"moe_intermediate_size positive")
        if self.layer_attention and (len(self.layer_attention) != self.num_layers
                                     or set(self.layer_attention) - {GLOBAL, LOCAL}):
            raise RooflineError(f"model {self.name}: layer_attention must give {GLOBAL!r} or {LOCAL!r} for each of "
                                f"the {self.num_layers} layers")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise RooflineError(f"model {self.name}: sliding_window must be positive, got {self.sliding_window}")

    # --- derived shape ---------------------------------------------------------------------------
    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Per layer, the attention it runs: GLOBAL (full causal) or LOCAL (sliding window)."""
        if self.layer_attention:
            return self.layer_attention
        return tuple(LOCAL if self.sliding_window else GLOBAL for _ in range(self.num_layers))

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def gated(self) -> bool:
        return self.activation in ("swiglu", "geglu")

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head: head_dim, or nope + rope parts under MLA (128 + 64 = 192)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        return self.num_layers - self.moe_layers

    def layer_counts(self) -> dict[tuple[str, str], int]:
        """How many layers of each (attention kind, MLP kind): layers are counted, not repeated."""
        out: dict[tuple[str, str], int] = {}
        for i, attn in enumerate(self.layer_kinds):
            mlp = MOE if self.is_moe and i >= self.first_dense_layers else DENSE
            out[(attn, mlp)] = out.get((attn, mlp), 0) + 1
        return out

    def attention_layers(self, kind: str) -> int:
        return sum(1 for a in self.layer_kinds if a == kind)

    def kv_elements_per_token_per_layer(self) -> int:
        """Values cached per token per layer: 2·G·d for K and V, or kv_lora_rank + qk_rope_head_dim for
        MLA's compressed latent (512 + 64 = 576 for DeepSeek-V3)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_cache_bytes_per_token(self, bytes_per_element: float = 2.0) -> float:
        """Bytes of KV cache one token of context adds, all layers: 2·G·d·layers·bytes.

        Llama 3 70B in BF16: 2·8·128·80·2 = 327,680 B = 320 KiB, the seed's figure."""
        return self.kv_elements_per_token_per_layer() * self.num_layers * bytes_per_element

    def cached_tokens(self, layer_kind: str, context: int) -> int:
        """Tokens a layer keeps and reads at `context`: all of them, or the window for a local layer."""
        if layer_kind == LOCAL and self.sliding_window:
            return min(context, self.sliding_window)
        return context

    def kv_cache_bytes(self, batch: int, context: int, bytes_per_element: float = 2.0) -> float:
        """KV cache for `batch` sequences of `context` tokens, windowed layers capped at the window."""
        per_layer = self.kv_elements_per_token_per_layer() * bytes_per_element
        return batch * per_layer * sum(self.cached_tokens(a, context) for a in self.layer_kinds)

    # --- parameter counts ------------------------------------------------------------------------
    def param_counts(self) -> Mapping[str, int]:
        """Parameters by part; `total_params` and `active_params` sum them."""
        return _param_counts(self)

    @property
    def total_params(self) -> int:
        return sum(v for k, v in self.param_counts().items() if not k.startswith("active."))

    @property
    def active_params(self) -> int:
        """Parameters one token uses: routed experts counted at experts_per_token, not num_experts."""
        counts = self.param_counts()
        return sum(v for k, v in counts.items() if k != "experts" and not k.startswith("active.")) \
            + counts.get("active.experts", 0)

    @property
    def matmul_params(self) -> int:
        """Active parameters a token multiplies: active minus the embedding tables (gathered, not
        multiplied), norm gains and biases. 2 × this is a token's matmul FLOPs outside attention."""
        c = self.param_counts()
        tied_head = self.vocab_size * self.hidden_size if self.tie_word_embeddings else 0  # the LM head reuses it
        return (self.active_params - c["embedding"] - c.get("position_embedding", 0) - c["norms"] - c["biases"]
                + tied_head)

    def attention_flop_per_pair(self) -> float:
        """FLOPs per (query, key) pair per layer: 2·H·(d_qk + d_v) for the two matmuls, the seed's
        4·h when d_qk = d_v and H·d = h. Under MLA as run in decode the query and key are the latent
        (kv_lora_rank + rope = 576 wide) and the values the latent (512): 2·128·(576 + 512)."""
        if self.is_mla:
            return 2.0 * self.num_heads * (self.kv_lora_rank + self.qk_rope_head_dim + self.kv_lora_rank)
        return 2.0 * self.num_heads * (self.qk_head_dim + self.v_dim)


def _param_counts(c: ModelConfig) -> Mapping[str, int]:
    h, L = c.hidden_size, c.num_layers
    counts: dict[str, int] = {}
    counts["embedding"] = c.vocab_size * h
    if c.learned_positions:
        counts["position_embedding"] = c.learned_positions * h
    counts["lm_head"] = 0 if c.tie_word_embeddings else c.vocab_size * h
    norm_params = 2 if c.norm == "layernorm" else 1  # LayerNorm: gain and bias
    norms_per_layer = 4 if c.sandwich_norm else 2
    norms = L * norms_per_layer * norm_params * h + norm_params * h  # + the final norm
    biases = 0
    if c.is_mla:
        H, dn, dr, dv = c.num_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        q = (h * c.q_lora_rank + c.q_lora_rank * H * (dn + dr)) if c.q_lora_rank else h * H * (dn + dr)
        kv = h * (c.kv_lora_rank + dr) + c.kv_lora_rank * H * (dn + dv)
        attn = q + kv + H * dv * h
        norms += L * (c.kv_lora_rank + (c.q_lora_rank or 0))  # q_a_layernorm, kv_a_layernorm
    else:
        H, G, d = c.num_heads, c.num_kv_heads, c.head_dim
        attn = h * (H + 2 * G) * d + H * d * h
        if c.qkv_bias or c.linear_bias:
            biases += L * (H + 2 * G) * d
        if c.linear_bias or c.o_bias:
            biases += L * h
        if c.qk_norm:
            norms += L * 2 * d
    counts["attention"] = L * attn
    mlp_mats = 3 if c.gated else 2
    counts["mlp"] = c.dense_layers * mlp_mats * h * c.intermediate_size
    if c.linear_bias:
        biases += c.dense_layers * (c.intermediate_size + h)
    if c.is_moe:
        per_expert = 3 * h * c.moe_intermediate_size
        counts["router"] = c.moe_layers * h * c.num_experts
        # DeepSeek-V3's e_score_correction_bias: added to the scores to pick experts, not multiplied
        biases += c.moe_layers * c.num_experts if c.router_bias else 0
        counts["shared_experts"] = c.moe_layers * c.num_shared_experts * per_expert
        counts["experts"] = c.moe_layers * c.num_experts * per_expert
        counts["active.experts"] = c.moe_layers * c.experts_per_token * per_expert
    counts["norms"] = norms
    counts["biases"] = biases
    return MappingProxyType(counts)


# --- parsing ---------------------------------------------------------------------------------------

class _Fields:
    """Reads a config dict, naming the file and field in every error."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def _bad(self, key: str, want: str, value: Any) -> RooflineError:
        return RooflineError(f"config {self.where}: field {key!r} must be {want}, got {value!r}")

    def integer(self, key: str, default: int | None = None, *alts: str) -> int:
        for k in (key, *alts):
            if k in self.raw and self.raw[k] is not None:
                value = self.raw[k]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise self._bad(k, "a non-negative integer", value)
                return value
        if default is None:
            raise RooflineError(f"config {self.where}: missing field {key!r}"
                                + (f" (or {', '.join(repr(a) for a in alts)})" if alts else ""))
        return default

    def optional_int(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._bad(key, "a positive integer or null", value)
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, "true or false", value)
        return value

    def text(self, key: str, default: str, *alts: str) -> str:
        for k in (key, *alts):
            value = self.raw.get(k)
            if value is not None:
                if not isinstance(value, str):
                    raise self._bad(k, "a string", value)
                return value
        return default


_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu_pytorch_tanh": "geglu", "gelu": "geglu",
                "gelu_new": "geglu", "gelu_fast": "geglu"}


def _gated_activation(f: _Fields) -> str:
    act = f.text("hidden_act", "silu", "hidden_activation")
    if act not in _ACTIVATIONS:
        raise RooflineError(f"config {f.where}: hidden_act {act!r} is not supported; "
                            f"supported: {', '.join(sorted(_ACTIVATIONS))}")
    return _ACTIVATIONS[act]


def _common(f: _Fields, name: str, model_type: str, tie_default: bool) -> dict[str, Any]:
    hidden = f.integer("hidden_size")
    heads = f.integer("num_attention_heads")
    if hidden % heads and "head_dim" not in f.raw:
        raise RooflineError(f"config {f.where}: hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {heads}; give head_dim")
    return {
        "name": name,
        "architecture": model_type,
        "hidden_size": hidden,
        "num_layers": f.integer("num_hidden_layers"),
        "num_heads": heads,
        "num_kv_heads": f.integer("num_key_value_heads", heads),
        "head_dim": f.integer("head_dim", hidden // heads),
        "intermediate_size": f.integer("intermediate_size"),
        "vocab_size": f.integer("vocab_size"),
        "max_position_embeddings": f.integer("max_position_embeddings"),
        "tie_word_embeddings": f.flag("tie_word_embeddings", tie_default),
        "activation": _gated_activation(f),
    }


def _llama(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    return ModelConfig(**kw)


def _mistral(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    return ModelConfig(**kw)


def _mixtral(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    kw["num_experts"] = f.integer("num_local_experts")
    kw["experts_per_token"] = f.integer("num_experts_per_tok")
    kw["moe_intermediate_size"] = kw["intermediate_size"]  # every expert is a full-width SwiGLU MLP
    kw["intermediate_size"] = 0
    return ModelConfig(**kw)


def _qwen2(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = True  # Qwen2 has biases on q, k and v, none elsewhere
    if f.flag("use_sliding_window", False):
        kw["sliding_window"] = f.optional_int("sliding_window")
        first_full = f.integer("max_window_layers", kw["num_layers"])
        kw["layer_attention"] = tuple(GLOBAL if i < first_full else LOCAL for i in range(kw["num_layers"]))
    return ModelConfig(**kw)


def _qwen3(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    kw["qk_norm"] = True
    return ModelConfig(**kw)


def _qwen3_moe(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    kw["qk_norm"] = True
    if f.integer("decoder_sparse_step", 1) != 1 or f.raw.get("mlp_only_layers"):
        raise RooflineError(f"config {f.where}: only decoder_sparse_step 1 with no mlp_only_layers is supported")
    kw["num_experts"] = f.integer("num_experts")
    kw["experts_per_token"] = f.integer("num_experts_per_tok")
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["intermediate_size"] = 0  # the dense width in the file is unused when every layer is MoE
    return ModelConfig(**kw)


def _deepseek(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    if f.integer("moe_layer_freq", 1) != 1:
        raise RooflineError(f"config {f.where}: only moe_layer_freq 1 is supported")
    kw["num_experts"] = f.integer("n_routed_experts")
    kw["experts_per_token"] = f.integer("num_experts_per_tok")
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["num_shared_experts"] = f.integer("n_shared_experts", 0)
    kw["first_dense_layers"] = f.integer("first_k_dense_replace", 0)
    kw["router_bias"] = model_type == "deepseek_v3"  # e_score_correction_bias
    kw["q_lora_rank"] = f.optional_int("q_lora_rank") or 0
    kw["kv_lora_rank"] = f.integer("kv_lora_rank")
    kw["qk_nope_head_dim"] = f.integer("qk_nope_head_dim")
    kw["qk_rope_head_dim"] = f.integer("qk_rope_head_dim")
    kw["v_head_dim"] = f.integer("v_head_dim")
    kw["head_dim"] = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    kw["num_kv_heads"] = kw["num_heads"]  # MLA: every head has its own (decompressed) K and V
    return ModelConfig(**kw)


def _gemma(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, True)
    kw["sandwich_norm"] = True
    kw["qk_norm"] = model_type.startswith("gemma3")
    window = f.optional_int("sliding_window")
    kw["sliding_window"] = window
    layers = kw["num_layers"]
    types = f.raw.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        kw["layer_attention"] = tuple(LOCAL if t == "sliding_attention" else GLOBAL for t in types)
    elif model_type == "gemma2":
        kw["layer_attention"] = tuple(LOCAL if i % 2 == 0 else GLOBAL for i in range(layers))  # even layers slide
    else:  # Gemma 3: sliding_window_pattern 6 = five local layers, then one global
        pattern = f.integer("sliding_window_pattern", 6)
        kw["layer_attention"] = tuple(GLOBAL if (i + 1) % pattern == 0 else LOCAL for i in range(layers))
    if window is None:
        kw["layer_attention"] = tuple(GLOBAL for _ in range(layers))
    return ModelConfig(**kw)


def _gpt2(f: _Fields, name: str, model_type: str) -> ModelConfig:
    hidden = f.integer("n_embd", None, "hidden_size")
    act = f.text("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu", "gelu_fast", "gelu_pytorch_tanh"):
        raise RooflineError(f"config {f.where}: activation_function {act!r} is not supported (GELU variants only)")
    positions = f.integer("n_positions", None, "max_position_embeddings")
    return ModelConfig(
        name=name, architecture=model_type, hidden_size=hidden,
        num_layers=f.integer("n_layer", None, "num_hidden_layers"),
        num_heads=f.integer("n_head", None, "num_attention_heads"),
        num_kv_heads=f.integer("n_head", None, "num_attention_heads"),
        head_dim=hidden // f.integer("n_head", None, "num_attention_heads"),
        intermediate_size=f.integer("n_inner", 4 * hidden),
        vocab_size=f.integer("vocab_size"), max_position_embeddings=positions,
        tie_word_embeddings=f.flag("tie_word_embeddings", True), norm="layernorm", activation="gelu",
        linear_bias=True, learned_positions=positions)


_PARSERS: dict[str, Callable[[_Fields, str, str], ModelConfig]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek,
    "deepseek_v2": _deepseek,
    "gemma2": _gemma,
    "gemma3_text": _gemma,
    "gemma3": _gemma,
    "gpt2": _gpt2,
}
SUPPORTED = tuple(_PARSERS)


def config_from_dict(raw: Mapping[str, Any], name: str = "model", where: str = "") -> ModelConfig:
    """Parse a Hugging Face config dict. Gemma 3's multimodal config nests the text model in text_config."""
    where = where or name
    if not isinstance(raw, Mapping):
        raise RooflineError(f"config {where}: expected a JSON object at the top level")
    model_type = raw.get("model_type")
    if model_type == "gemma3" and isinstance(raw.get("text_config"), Mapping):
        raw = {**raw["text_config"], "model_type": "gemma3_text"}
        model_type = "gemma3_text"
    if not isinstance(model_type, str):
        raise RooflineError(f"config {where}: missing field 'model_type'; supported: {', '.join(SUPPORTED)}")
    if model_type not in _PARSERS:
        raise RooflineError(f"config {where}: architecture {model_type!r} is not supported; "
                            f"supported: {', '.join(SUPPORTED)}")
    config = _PARSERS[model_type](_Fields(raw, where), name, model_type)
    return config


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise RooflineError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"config {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(raw, dict):
        raise RooflineError(f"config {path}: expected a JSON object at the top level")
    return raw


@cache
def _preset_raw(name: str) -> Mapping[str, Any]:
    return MappingProxyType(_read_json(PRESETS_DIR / f"{name}.json"))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def preset_dict(name: str) -> dict[str, Any]:
    """A preset's HF-shaped config dict (a copy: overrides may change it)."""
    key = name.strip().lower()
    names = preset_names()
    if key not in names:
        raise unknown("model", name, names, "give a preset name or a path to a config.json")
    return dict(_preset_raw(key))


def _coerce(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, str] | None) -> dict[str, Any]:
    """`--set num_key_value_heads=64` style what-ifs: values are JSON (numbers, true, null) or strings."""
    out = dict(raw)
    for key, value in (overrides or {}).items():
        out[key] = _coerce(value) if isinstance(value, str) else value
    return out


class _Reads(dict[str, Any]):
    """A config dict that remembers which fields the parser looked at, so that a `--set` of a field
    no parser reads (a typo, or another architecture's name for it) is an error, not a silent no-op."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        super().__init__(raw)
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.seen.add(key)
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)


def _parse_with_overrides(raw: Mapping[str, Any], overrides: Mapping[str, str] | None, name: str,
                          where: str) -> ModelConfig:
    reads = _Reads(apply_overrides(raw, overrides))
    cfg = config_from_dict(reads, name, where)
    for key in overrides or {}:
        if key not in reads.seen:
            import difflib

            close = difflib.get_close_matches(key, sorted(reads.seen), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise RooflineError(f"--set {key}: {where} has no field {key!r} that the model is built from{hint}")
    return cfg


def load_config(model: str | ModelConfig, overrides: Mapping[str, str] | None = None) -> ModelConfig:
    """A preset name, a config.json path, or a folder holding config.json. Nothing is downloaded."""
    if isinstance(model, ModelConfig):
        if overrides:
            raise RooflineError("overrides apply to a preset or a config file, not to a parsed ModelConfig")
        return model
    text = model.strip()
    path = Path(text).expanduser()
    if text.endswith(".json") or "/" in text or path.exists():
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise RooflineError(f"no config file at {path} (give a config.json, a folder holding one, "
                                f"or a preset: {', '.join(preset_names())})")
        raw = _read_json(path)
        name = path.parent.name if path.name == "config.json" else path.stem
        cfg = _parse_with_overrides(raw, overrides, name, str(path))
        return _with_source(cfg, str(path))
    raw = preset_dict(text)
    return _with_source(_parse_with_overrides(raw, overrides, text.lower(), f"preset {text}"),
                        f"preset {text.lower()}")


def _with_source(cfg: ModelConfig, source: str) -> ModelConfig:
    from dataclasses import replace

    return replace(cfg, source=source)


__all__ = ["DENSE", "GLOBAL", "LOCAL", "MOE", "SUPPORTED", "ModelConfig", "apply_overrides", "config_from_dict",
           "load_config", "preset_dict", "preset_names"]
