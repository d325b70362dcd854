"""Fuzzing the loaders (issue 13): whatever a config.json, a machine file or a system file holds, the
loader returns a value or raises RooflineError (one line at the command line), never another
exception, and what it returns is sound (a config's counts positive, a machine's figures finite and
positive); and a machine written by machine_to_toml reads back equal, whatever its strings.

Bounded: about 200 examples each, no deadline (the machine is shared), a few seconds per test.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.errors import RooflineError
from roofline.fileio import read_text_file
from roofline.hardware import load_machine_file, machine_to_toml, parse_machine
from roofline.hardware.catalog import DATA, FIGURE_RANGES
from roofline.hardware.system_file import parse_system
from roofline.models.config import PRESETS_DIR, apply_overrides, config_from_dict, preset_names
from roofline.models.transformer import ModelConfig

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# every key a parser reads (the union over architectures) and the quantization_config keys
CONFIG_KEYS = sorted({k for name in preset_names() for k in json.loads((PRESETS_DIR / f"{name}.json").read_text())}
                     | {"head_dim", "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
                        "sliding_window_pattern", "decoder_sparse_step", "mlp_only_layers", "attention_bias",
                        "hidden_activation", "n_inner", "activation_function", "text_config"})
QUANT_KEYS = ["quant_method", "bits", "group_size", "zero_point", "fmt", "weight_block_size", "load_in_4bit",
              "load_in_8bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "config_groups"]
QUANT_METHODS = ["fp8", "gptq", "awq", "bitsandbytes", "compressed-tensors", "mxfp4", "fbgemm_fp8", "hqq"]

SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-3, max_value=300),  # near the edges: 0, negatives, small sizes
    st.integers(min_value=-(2**70), max_value=2**70),  # beyond int32 and int64
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["silu", "gelu", "sliding_attention", "full_attention", "llama"]),
)
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12)
QUANT = st.one_of(JSON_VALUES, st.fixed_dictionaries(
    {"quant_method": st.sampled_from(QUANT_METHODS)},
    optional={k: st.one_of(JSON_VALUES, st.integers(-1, 256), st.lists(st.integers(-1, 256), max_size=3))
              for k in QUANT_KEYS[1:]}))


def assert_sound_config(cfg: ModelConfig) -> None:
    """What a loaded config is used for right away: its shape counts and sizes are positive, its
    parameter count and its cache finite, positive numbers, its weights' dtype a real width."""
    assert isinstance(cfg, ModelConfig)
    for count in (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.vocab_size):
        assert isinstance(count, int) and count >= 1, cfg
    assert cfg.total_params > 0 and cfg.kv_cache_bytes_per_token() > 0
    assert math.isfinite(cfg.total_params) and math.isfinite(cfg.kv_cache_bytes_per_token())
    if cfg.weights_dtype is not None:
        assert math.isfinite(cfg.weights_dtype.bytes_per_element) and cfg.weights_dtype.bytes_per_element > 0


def assert_sound_machine(m: Any) -> None:
    """Every figure a placement divides by is finite and positive."""
    assert m.matrix_flop_per_s, m.id
    for figure in (*m.matrix_flop_per_s.values(), m.memory_bytes_per_s):
        assert math.isfinite(figure) and figure > 0


def _preset(name: str) -> dict[str, Any]:
    return json.loads((PRESETS_DIR / f"{name}.json").read_text())


@FUZZ
@given(base=st.sampled_from(preset_names()),
       changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON_VALUES, max_size=4),
       quantization=st.one_of(st.none(), QUANT))
def test_any_config_loads_or_is_one_roofline_error(base: str, changes: dict[str, Any], quantization: Any) -> None:
    raw = {**_preset(base), **changes}
    if quantization is not None:
        raw["quantization_config"] = quantization
    try:
        cfg = config_from_dict(raw, "fuzz")
    except RooflineError:
        return
    assert_sound_config(cfg)


@FUZZ
@given(base=st.sampled_from(preset_names()),
       overrides=st.dictionaries(st.sampled_from(CONFIG_KEYS), st.text(max_size=20), max_size=3))
def test_any_set_override_loads_or_is_one_roofline_error(base: str, overrides: dict[str, str]) -> None:
    try:  # --set key=value: the value is JSON or else a string
        cfg = config_from_dict(apply_overrides(_preset(base), overrides), "fuzz")
    except RooflineError:
        return
    assert_sound_config(cfg)


@FUZZ
@given(data=st.binary(max_size=200))
def test_any_bytes_read_as_text_or_one_roofline_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f"
        path.write_bytes(data)
        try:
            text = read_text_file(path, "fuzz")
        except RooflineError:
            return
        # the bytes' own text: without a byte-order mark they were UTF-8 and encode back to themselves
        if not data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
            assert text.encode("utf-8") == data


# --- machine files -------------------------------------------------------------------------------

TOML_SCALARS = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(),
    st.text(max_size=12), st.dates(), st.datetimes(), st.times(),
    st.sampled_from(["3.35 TB/s", "989 TFLOP/s", "80 GiB", "1e999 TFLOP/s", "0 B/s", "-1 TB/s", "5 us", "gpu"]),
)
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=8)
MACHINE_BASES = [tomllib.loads(p.read_text()) for p in sorted(DATA.glob("*.toml"))[:4]]
SYSTEM_BASES = [tomllib.loads(p.read_text()) for p in sorted((DATA / "systems").glob("*.toml"))[:3]]
# where a value may be put: a top-level key, or a key inside one of the document's tables
MACHINE_PLACES = ["id", "name", "kind", "aliases", "notes", "note", "vendor", "year", "measured", "architecture",
                  "peak", "memory", "interconnect", "bogus", "peak.matrix", "peak.vector", "peak.dense",
                  "peak.matrix.bf16", "peak.matrix.fp8", "peak.matrix.source", "peak.matrix.fp5",
                  "memory.dram", "memory.l2", "memory.hbm", "memory.dram.bandwidth", "memory.dram.capacity",
                  "memory.dram.note", "memory.l2.capacity", "interconnect.bandwidth", "interconnect.name",
                  "interconnect.speed"]
SYSTEM_PLACES = ["id", "name", "kind", "aliases", "notes", "note", "device", "devices_per_node", "max_nodes",
                 "source", "link", "link.node", "link.network", "link.other", "link.node.bandwidth",
                 "link.node.latency", "link.node.topology", "link.node.measured", "link.node.name",
                 "link.network.bandwidth", "link.node.speed"]


def _mutate(base: dict[str, Any], changes: list[tuple[str, Any]]) -> dict[str, Any]:
    """A deep copy of `base` with each (dotted place, value) set; a place under a non-table is skipped."""
    doc = json.loads(json.dumps(base))  # the catalog files hold strings, numbers, lists and tables only
    for place, value in changes:
        *tables, key = place.split(".")
        at = doc
        for t in tables:
            at = at.setdefault(t, {}) if isinstance(at, dict) else None
        if isinstance(at, dict):
            at[key] = value
    return doc


def _changes(places: list[str]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    return st.lists(st.tuples(st.sampled_from(places), TOML_VALUES), min_size=1, max_size=3)


@FUZZ
@given(base=st.sampled_from(MACHINE_BASES), changes=_changes(MACHINE_PLACES))
def test_any_machine_document_loads_or_is_one_roofline_error(base: dict[str, Any],
                                                             changes: list[tuple[str, Any]]) -> None:
    raw = tomllib.loads(tomli_w.dumps(_mutate(base, changes)))  # what a file can hold: dates, times, tables
    try:
        m = parse_machine(raw, "fuzz.toml")
    except RooflineError:
        return
    assert_sound_machine(m)


@FUZZ
@given(text=st.text(max_size=120))
def test_any_text_as_a_machine_file_loads_or_is_one_roofline_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.toml"
        path.write_text(text, encoding="utf-8")
        try:
            m = load_machine_file(path)
        except RooflineError:
            return
        assert_sound_machine(m)


@FUZZ
@given(base=st.sampled_from(SYSTEM_BASES), changes=_changes(SYSTEM_PLACES))
def test_any_system_document_loads_or_is_one_roofline_error(base: dict[str, Any],
                                                            changes: list[tuple[str, Any]]) -> None:
    try:
        s = parse_system(tomllib.loads(tomli_w.dumps(_mutate(base, changes))), "fuzz.toml")
    except RooflineError:
        return
    assert math.isfinite(s.node_link.bytes_per_s) and s.node_link.latency_s > 0


def test_the_mutations_keep_some_documents_loadable() -> None:
    # the fuzzers above reach the end of the parsers: a harmless change loads, a bad one is refused
    assert parse_machine(_mutate(MACHINE_BASES[0], [("vendor", "someone")]), "x").vendor == "someone"
    assert parse_system(_mutate(SYSTEM_BASES[0], [("max_nodes", 1)]), "x").max_nodes == 1


# --- the writer: write, load, equal ---------------------------------------------------------------

def _figure(kind: str) -> st.SearchStrategy[float]:
    lo, hi = FIGURE_RANGES[kind]
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


TEXT = st.text(max_size=20)  # any characters: quotes, backslashes, newlines, control characters, emoji


@FUZZ
@given(id_=TEXT.filter(str.strip), name=TEXT.filter(str.strip), notes=st.lists(TEXT, max_size=3),
       aliases=st.lists(TEXT, max_size=2), vendor=TEXT, source=TEXT,
       year=st.one_of(st.none(), st.integers(1940, 2200)), measured=st.booleans(),
       peaks=st.dictionaries(st.sampled_from(["fp64", "fp32", "bf16", "fp8", "int8", "fp4"]), _figure("flop_per_s"),
                             min_size=1, max_size=4),
       bandwidth=_figure("bytes_per_s"), capacity=st.one_of(st.none(), _figure("bytes")),
       link=st.one_of(st.none(), _figure("bytes_per_s")), header=TEXT)
def test_any_machine_round_trips_through_its_file(id_: str, name: str, notes: list[str], aliases: list[str],
                                                  vendor: str, source: str, year: int | None, measured: bool,
                                                  peaks: dict[str, float], bandwidth: float,
                                                  capacity: float | None, link: float | None, header: str) -> None:
    doc: dict[str, Any] = {"id": id_, "name": name, "notes": notes, "aliases": aliases, "vendor": vendor,
                           "measured": measured, "peak": {"matrix": {**peaks, "source": source}},
                           "memory": {"dram": {"bandwidth": bandwidth, "source": source}}}
    if year is not None:
        doc["year"] = year
    if capacity is not None:
        doc["memory"]["dram"]["capacity"] = capacity
    if link is not None:
        doc["interconnect"] = {"bandwidth": link, "name": name, "source": source}
    m = parse_machine(doc, "")
    text = machine_to_toml(m, header=header)
    assert parse_machine(tomllib.loads(text), "") == m


@settings(max_examples=50, deadline=None)
@given(when=st.dates())
def test_a_date_is_never_a_figure(when: dt.date) -> None:
    doc = {"id": "x", "name": "X", "peak": {"matrix": {"bf16": when}}, "memory": {"dram": {"bandwidth": "1 TB/s"}}}
    try:
        parse_machine(doc, "d.toml")
    except RooflineError as exc:
        assert "[peak.matrix] bf16 must be a quantity like" in str(exc)
    else:
        raise AssertionError("a date was read as a peak")


@FUZZ
@given(text=st.text(max_size=40), comment=st.text(max_size=40))
def test_the_system_file_writers_strings_read_back(text: str, comment: str) -> None:
    # `measure --collectives --save` writes its system file by hand (for its inline comments): its
    # string and comment escaping must hold for any device name or id
    from roofline.measure.collectives import _comment_line, _toml_string

    assert tomllib.loads(f"# {_comment_line(comment)}\nx = {_toml_string(text)}\n") == {"x": text}
