"""Transformer configs: a Hugging Face `config.json` (or a preset, which is one) in, a ModelConfig out.

Nothing is downloaded. A config comes from a file, a model folder holding `config.json`, or a preset
under `presets/` (one JSON file each, shaped like the model's own `config.json`). One parser per
`model_type` reads the fields that architecture uses; a missing field is named, an unknown
architecture lists the supported ones.

ModelConfig itself (the shape, the KV cache, the parameter counts) is in
`roofline.models.transformer`.

Layering: imports roofline.errors and roofline.models.transformer only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError, unknown
from roofline.models.transformer import AttentionKind, ModelConfig

GLOBAL, LOCAL = AttentionKind.GLOBAL, AttentionKind.LOCAL

PRESETS_DIR = Path(__file__).parent / "presets"

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


__all__ = ["SUPPORTED", "ModelConfig", "apply_overrides", "config_from_dict", "load_config", "preset_dict",
           "preset_names"]
