"""Every bad input a user can hand the loaders (issue 13): model configs (config.json and --set),
quantization_config, machine and system files, and the TOML writer of `measure --save`.

Each repro that used to end in a traceback (ZeroDivisionError, RecursionError, TypeError, a hang on a
FIFO, MemoryError on /dev/zero) or in a silent wrong answer (intermediate_size 0 printed as an
infinite-intensity kernel, a quantized checkpoint analysed as BF16, a file shadowed by a catalog id)
is a test here: one line on stderr beginning `roofline: error:`, exit code 2, or the right figure.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.fileio import read_text_file
from roofline.hardware import catalog, get_machine, load_machine_file, machine_to_toml, parse_machine
from roofline.hardware.catalog import FIGURE_RANGES, shadow_note
from roofline.models import analyze_model
from roofline.models.config import PRESETS_DIR, checkpoint_weights, config_from_dict, load_config
from roofline.models.dtypes import for_checkpoint, model_dtypes
from roofline.vocab import Level

PRESET = json.loads((PRESETS_DIR / "llama-3-8b.json").read_text())


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command; it must fail with exactly one `roofline: error:` line and exit code 2."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith("roofline: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def write_json(path: Path, raw: Any) -> str:
    path.write_text(json.dumps(raw))
    return str(path)


# --- model configs: sizes, counts, types -----------------------------------------------------------

@pytest.mark.parametrize(("model", "setting", "named"), [
    ("llama-3-8b", "num_attention_heads=0", "'num_attention_heads' must be a positive integer"),  # ZeroDivisionError
    ("gpt2", "n_head=0", "'n_head' must be a positive integer"),  # ZeroDivisionError in hidden // n_head
    ("llama-3-8b", "intermediate_size=0", "'intermediate_size' must be a positive integer"),  # was accepted
    ("llama-3-8b", "num_hidden_layers=-3", "'num_hidden_layers' must be a positive integer"),
    ("llama-3-8b", "hidden_size=4096.0", "'hidden_size' must be a positive integer"),  # a float
    ("llama-3-8b", "hidden_size=true", "got True"),  # a bool is not a size
    ("llama-3-8b", "vocab_size=\"big\"", "got 'big'"),
    ("llama-3-8b", "num_key_value_heads=64", "'num_key_value_heads' (64) must be at most num_attention_heads (32)"),
    ("deepseek-v3", "first_k_dense_replace=62", "'first_k_dense_replace' (62) must be at most num_hidden_layers (61)"),
    ("deepseek-v3", "n_shared_experts=-1", "'n_shared_experts' must be an integer of at least 0"),
    ("mixtral-8x7b", "num_experts_per_tok=9", "'num_experts_per_tok' (9) must be at most num_local_experts (8)"),
    ("llama-3-8b", "hidden_size=4294967296", "at most 2,147,483,647"),  # 2**32: beyond any model
])
def test_bad_config_values_are_one_line_naming_the_field(capsys: pytest.CaptureFixture[str], model: str,
                                                         setting: str, named: str) -> None:
    err = one_error_line(capsys, "model", model, "--set", setting)
    assert named in err


def test_gemma3_sliding_window_pattern_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `(i + 1) % pattern` divided by zero
    raw = {**json.loads((PRESETS_DIR / "gemma-2-9b.json").read_text()), "model_type": "gemma3_text",
           "sliding_window_pattern": 0}
    err = one_error_line(capsys, "model", write_json(tmp_path / "config.json", raw))
    assert "'sliding_window_pattern' must be a positive integer" in err


def test_gemma_layer_types_must_name_each_layer() -> None:
    raw = {**json.loads((PRESETS_DIR / "gemma-2-9b.json").read_text()), "layer_types": ["sliding_attention"]}
    with pytest.raises(RooflineError, match="'layer_types' must be a list of 42 \\(num_hidden_layers\\)"):
        config_from_dict(raw)
    # the right list is read: 42 layers alternating from sliding, as Gemma 2 runs them
    raw["layer_types"] = ["sliding_attention", "full_attention"] * 21
    assert config_from_dict(raw).attention_layers(config_from_dict(raw).layer_kinds[0]) == 21


def test_a_5000_digit_number_and_deep_nesting_in_set(capsys: pytest.CaptureFixture[str]) -> None:
    # Python refuses int("9" * 5000) (its 4,300-digit limit: ValueError); json recursion: RecursionError
    err = one_error_line(capsys, "model", "llama-3-8b", "--set", "vocab_size=" + "9" * 5000)
    assert "--set vocab_size: the number has more than 4,300 digits" in err
    err = one_error_line(capsys, "model", "llama-3-8b", "--set", "vocab_size=" + "[" * 200_000)
    assert "--set vocab_size: the value is nested too deeply" in err


@pytest.mark.parametrize(("text", "says"), [
    ("[" * 200_000, "its JSON is nested too deeply"),  # RecursionError
    ('{"vocab_size": ' + "9" * 5000 + "}", "a number in it has more than 4,300 digits"),  # ValueError
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object at the top level"),
])
def test_malformed_config_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    assert says in one_error_line(capsys, "model", str(path))


# --- model configs: encodings, sizes, kinds of file -------------------------------------------------

def test_utf16_and_utf8_bom_configs_load_as_utf8_does(tmp_path: Path) -> None:
    text = json.dumps(PRESET)
    plain = load_config(write_json(tmp_path / "plain.json", PRESET))
    for name, encoding in (("u16.json", "utf-16"), ("u32.json", "utf-32"), ("bom.json", "utf-8-sig")):
        (tmp_path / name).write_bytes(text.encode(encoding))  # Python writes the byte-order mark
        assert replace(load_config(str(tmp_path / name)), name="plain", source="") == replace(plain, source="")


def test_latin1_config_is_refused_naming_the_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps({**PRESET, "_name_or_path": "café"}, ensure_ascii=False)
    path = tmp_path / "config.json"
    path.write_bytes(text.encode("latin-1"))
    offset = text.index("é")  # every character before it is ASCII: one byte each
    err = one_error_line(capsys, "model", str(path))
    assert f"is not UTF-8 text (byte 0xe9 at offset {offset}); save it as UTF-8" in err


def test_a_config_over_16_mib_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the cap (roofline.models.config_input.MAX_CONFIG_BYTES) is 16 MiB: MiniMax-M3-NVFP4's real config is 3.09 MB
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**PRESET, "pad": "x" * (16 << 20)}))
    size = path.stat().st_size
    err = one_error_line(capsys, "model", str(path))
    assert f"is {size:,} bytes; a config file is at most {16 * 1024 * 1024:,} bytes" in err


def test_a_config_of_3_mb_is_read(tmp_path: Path) -> None:
    # 1 MiB refused NVIDIA's MiniMax-M3-NVFP4 (config.json 3,087,083 B): a config that large is read
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**PRESET, "pad": "x" * 3_100_000}))
    assert load_config(str(path)).hidden_size == PRESET["hidden_size"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_and_dev_zero_are_refused_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # read_text() waited forever for a writer
    machine = tmp_path / "m.toml"
    os.mkfifo(machine)
    calibration = tmp_path / "c.json"
    os.mkfifo(calibration)
    for argv in (("model", str(fifo)), ("model", "llama-3-8b", "--machine", str(machine)),
                 ("machine", str(machine)), ("machines", str(machine)),
                 ("kernel", "matmul", "64", "64", "64", "--machine", str(machine))):
        assert "is not a regular file (a device, pipe or socket); give a file" in one_error_line(capsys, *argv)
    from roofline.measure.calibration import load_calibration

    with pytest.raises(RooflineError, match="is not a regular file"):
        load_calibration(calibration)
    if Path("/dev/zero").exists():  # read_text() filled memory: MemoryError
        for argv in (("model", "/dev/zero"), ("machine", "/dev/zero"),
                     ("kernel", "matmul", "64", "64", "64", "--machine", "/dev/zero")):
            assert "/dev/zero is not a regular file" in one_error_line(capsys, *argv)


def test_read_text_file_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RooflineError, match=r"^thing file .*missing\.txt does not exist$"):
        read_text_file(tmp_path / "missing.txt", "thing")
    with pytest.raises(RooflineError, match="is a folder; give a file"):
        read_text_file(tmp_path, "thing")
    (tmp_path / "ten.txt").write_text("0123456789")
    with pytest.raises(RooflineError, match="is 10 bytes; a thing file is at most 9 bytes"):
        read_text_file(tmp_path / "ten.txt", "thing", max_bytes=9)
    assert read_text_file(tmp_path / "ten.txt", "thing", max_bytes=10) == "0123456789"


# --- quantization_config ---------------------------------------------------------------------------

def quantized(q: Any) -> Any:
    return config_from_dict({**PRESET, "quantization_config": q})


@pytest.mark.parametrize(("q", "name", "bits"), [
    # DeepSeek-V3 / Qwen3-FP8: E4M3 and one FP32 weight_scale_inv per 128×128 block
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8_e4m3_block128x128",
     8 + 32 / (128 * 128)),
    ({"quant_method": "fp8"}, "fp8_e4m3", 8),  # one scale per tensor: not counted
    # GPTQ: FP16 scale + packed 4-bit zero point (qzeros, stored even when sym) per 128 weights
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}, "int4_g128_zp", 4 + (16 + 4) / 128),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "int4_g128_zp", 4 + (16 + 4) / 128),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False}, "int4_g64", 4 + 16 / 64),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "int8", 8),  # per-channel scales: not counted
    # bitsandbytes NF4: one FP32 absmax per 64 weights; double-quantised: 8-bit absmax + FP32 per 256 blocks
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "nf4", 4 + 32 / 64),
    ({"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}, "nf4_dq",
     4 + 8 / 64 + 32 / (64 * 256)),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8", 8),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}},
     "int4_g128", 4 + 16 / 128),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "channel"}}}}, "fp8_e4m3", 8),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}, "nvfp4", 4 + 8 / 16),
    ({"quant_method": "mxfp4"}, "mxfp4", 4 + 8 / 32),
])
def test_quantization_config_sets_the_weights_dtype(q: dict[str, Any], name: str, bits: float) -> None:
    cfg = quantized(q)
    assert cfg.weights_dtype is not None and cfg.load_warnings == ()
    assert (cfg.weights_dtype.name, cfg.weights_dtype.bits_per_element) == (name, bits)


def test_an_unread_quantization_method_is_one_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path / "config.json", {**PRESET, "quantization_config": {"quant_method": "hqq"}})
    assert main(["model", path, "--json"]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if "quantization_config" in line]
    assert warnings == [f"roofline: warning: {path}: quantization_config quant_method 'hqq' is not read; its weights "
                        "are analysed as bf16 unless --weights-dtype says otherwise (int4, fp8, nvfp4, ...)"]
    assert json.loads(out)["dtypes"]["weights"] == "bf16"


@pytest.mark.parametrize(("q", "says"), [
    (5, "field 'quantization_config' must be an object, got 5"),
    ({"bits": 4}, "quantization_config needs a 'quant_method'"),
    ({"quant_method": "gptq", "bits": 5}, "'bits' must be 2, 3, 4 or 8, got 5"),
    ({"quant_method": "gptq", "group_size": 0}, "'group_size' must be -1 or a positive integer, got 0"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "'weight_block_size' must be two positive integers"),
    ({"quant_method": "fp8", "fmt": "e3m4"}, "'fmt' must be one of 'e4m3', 'e4m3fn', 'float8_e4m3fn'"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": "yes"}, "'load_in_4bit' must be true or false"),
])
def test_a_malformed_quantization_config_is_one_line(q: Any, says: str) -> None:
    with pytest.raises(RooflineError, match=f"^config model: .*{_escape(says)}"):
        quantized(q)


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_deepseek_v3_preset_ships_fp8_weights_with_block_scales() -> None:
    # https://huggingface.co/deepseek-ai/DeepSeek-V3 config.json: quantization_config
    # {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}: 8 bits a weight plus one
    # FP32 scale per 128 × 128 = 16,384 weights
    cfg = load_config("deepseek-v3")
    assert cfg.weights_dtype is not None and cfg.weights_dtype.bytes_per_element == (8 + 32 / 16384) / 8
    a = analyze_model("deepseek-v3", "h200", "decode", 1, 4096)
    assert a.model.dtypes.weights.name == "fp8_e4m3_block128x128"
    from roofline.explain import explain_model

    # (8 + 32/16384) / 8 = 1.000244 bytes a weight, said where the dtypes are
    assert ("weights as the checkpoint stores them (its quantization_config): quant_method fp8: FP8 E4M3 weights, "
            "one 32-bit scale per 128x128 block (8 + 32/16384 bits) = 1.00024 bytes each") in explain_model(a)
    # the FP8 checkpoint's bytes: its linear layers at 1.000244 B, not BF16's 2; the tables, norm gains
    # and the router's correction bias stay BF16 (transformers' FP8 quantizer replaces nn.Linear only, and
    # never the output embedding): 2·129,280·7,168 = 1.85 B parameters at 2 bytes, and as many again for
    # the multi-token-prediction layer's own copies of them (roofline.models.mtp), with its norms; and the
    # routers, main and MTP (DeepseekV3TopkRouter holds a Parameter, not an nn.Linear: 59 layers × h·256)
    parts = cfg.param_counts().parts
    kept = parts["embedding"] + parts["lm_head"] + parts["norms"] + parts["biases"] + parts["mtp_tables"] \
        + parts["mtp_norms"] + parts["router"] + 7_168 * 256
    assert kept == 2 * 2 * 129_280 * 7_168 + parts["norms"] + 58 * 256 + parts["mtp_norms"] + 59 * 7_168 * 256
    assert a.memory.weights_bytes == pytest.approx((cfg.total_params - kept) * (8 + 32 / 16384) / 8 + kept * 2,
                                                   rel=1e-12)
    # --weights-dtype still chooses: BF16 is 2 bytes a weight
    b = analyze_model("deepseek-v3", "h200", "decode", 1, 4096, dtypes=model_dtypes("bf16"))
    assert b.memory.weights_bytes == pytest.approx(cfg.total_params * 2, rel=1e-12)
    assert for_checkpoint(model_dtypes("int4"), cfg.weights_dtype).weights.name == "int4"


def test_a_config_without_quantization_keeps_bf16() -> None:
    assert checkpoint_weights(PRESET, "x") == (None, ())
    assert analyze_model("llama-3-8b", "h100", "decode", 1, 128).model.dtypes.weights.name == "bf16"


# --- machine files -------------------------------------------------------------------------------

BASE = 'id = "x"\nname = "X"\n[peak.matrix]\nbf16 = "100 TFLOP/s"\n[memory.dram]\n'


@pytest.mark.parametrize(("doc", "says"), [
    (BASE + "bandwidth = [1, 2]", "[memory.dram] bandwidth must be a quantity like"),  # TypeError
    (BASE + "bandwidth = {a = 1}", "[memory.dram] bandwidth must be a quantity like"),
    (BASE + "bandwidth = 1979-05-27", "[memory.dram] bandwidth must be a quantity like"),
    ('kind = ["gpu"]\n' + BASE + 'bandwidth = "1 TB/s"', "kind must be one of accelerator, cpu, gpu, tpu"),
    ("notes = 5\n" + BASE + 'bandwidth = "1 TB/s"', "notes must be a list of strings, got 5"),  # TypeError
    ("note = {a = 1}\n" + BASE + 'bandwidth = "1 TB/s"', "note must be a string"),
    ("vendor = 1979-05-27\n" + BASE + 'bandwidth = "1 TB/s"', "vendor must be a string"),
    ('measured = "no"\n' + BASE + 'bandwidth = "1 TB/s"', "measured must be true or false"),
    ("year = true\n" + BASE + 'bandwidth = "1 TB/s"', "year must be an integer from 1940 to 2200"),
    (BASE + "bandwidth = inf", "[memory.dram] bandwidth"),
    (BASE + "bandwidth = nan", "[memory.dram] bandwidth"),
    (BASE.replace('"100 TFLOP/s"', '"1e999 TFLOP/s"') + 'bandwidth = "1 TB/s"', "[peak.matrix] bf16"),
    # finite but absurd: the ridge 1e300 / 1e-300 overflowed the JSON and the page
    (BASE.replace('"100 TFLOP/s"', "1e300") + 'bandwidth = "1 TB/s"', "[peak.matrix] bf16"),
    (BASE + "bandwidth = 1e-300", "[memory.dram] bandwidth must be from 1 MB/s to 10 PB/s"),
    (BASE + "bandwidth = " + "1" + "0" * 400, "[memory.dram] bandwidth must be from 1 MB/s to 10 PB/s"),
    (BASE + 'bandwidth = "1 TB/s"\ncapacity = "2 PiB"', "[memory.dram] capacity must be from 1 B to 1 PiB"),
    (BASE + 'bandwidth = "1 TB/s"\n[interconnect]\nbandwidth = "1 TB/s"\nspeed = 1', "[interconnect] has unknown"),
    ("a = " + "[" * 100_000, "is not a machine file: its arrays or tables nest too deeply"),  # RecursionError
])
def test_bad_machine_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: str,
                                        says: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(doc)
    assert says in one_error_line(capsys, "machine", str(path))
    with pytest.raises(RooflineError):
        load_machine_file(path)


def test_the_figure_ranges_bound_the_ridge() -> None:
    # the highest peak over the lowest bandwidth: 1e19 / 1e6 = 1e13 FLOP/B, finite for every chart
    assert FIGURE_RANGES["flop_per_s"][1] / FIGURE_RANGES["bytes_per_s"][0] == 1e13
    for m in catalog().values():  # every datasheet figure sits inside them
        for peak in m.matrix_flop_per_s.values():
            assert FIGURE_RANGES["flop_per_s"][0] <= peak <= FIGURE_RANGES["flop_per_s"][1]


def test_a_machine_file_that_takes_a_catalog_id_is_the_file(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    h100 = catalog()["h100-sxm"]
    raw = tomllib.loads(machine_to_toml(h100))
    raw.update(id="h100", aliases=[])
    raw["memory"]["dram"]["bandwidth"] = "1 TB/s"
    path = tmp_path / "my.toml"
    import tomli_w

    path.write_text(tomli_w.dumps(raw))
    assert get_machine(str(path)).memory_bytes_per_s == 1e12  # the file's, not the catalog's 3.35 TB/s
    assert main(["machines", "h100", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [m["memory_bytes_per_s"] for m in json.loads(out)] == [3.35e12, 1e12]
    assert err == f"roofline: warning: {shadow_note(get_machine(str(path)))}\n"
    assert "names its machine 'h100', as the catalog's h100-sxm is named; the file's figures are used" in err


def test_the_roofs_chart_draws_the_files_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    h100 = catalog()["h100-sxm"]
    path = tmp_path / "my.toml"
    dram = replace(h100.memory[Level.DRAM], bytes_per_s=1e12)
    path.write_text(machine_to_toml(replace(h100, id="h100", aliases=(), memory={**h100.memory, Level.DRAM: dram})))
    drawn: list[Any] = []
    import roofline.report.outputs as outputs

    def record(roofs: list[Any], **kw: Any) -> list[Path]:
        drawn.extend(roofs)
        return []

    monkeypatch.setattr(outputs, "write_roofs_chart", record)
    assert main(["machines", "h100", str(path), "--png", str(tmp_path / "r.png")]) == 0
    capsys.readouterr()
    # the catalog's 3.35 TB/s, then the file's 1 TB/s (the chart used to look the file's id up again)
    assert [m.memory_bytes_per_s for m, _ in drawn] == [3.35e12, 1e12]


# --- the machine file writer ------------------------------------------------------------------------

def test_every_catalog_machine_round_trips_exactly() -> None:
    # a measured machine has no [chip] table, and machine_to_toml writes none: compared without it
    for m in catalog().values():
        m = replace(m, chip=None)
        again = parse_machine(tomllib.loads(machine_to_toml(m, header="written by a test\nsecond line")), m.path)
        assert again == m, m.id


def test_an_id_with_a_newline_writes_a_file_that_loads(tmp_path: Path) -> None:
    # `measure --id $'a\nb' --save m.toml` wrote `id = "a` + newline + `b"`: not TOML
    m = replace(catalog()["h100-sxm"], chip=None, id="a\nb", name='say "hi" \\ \t\x01 \u00e9', notes=("x\x00y", "\x7f"))
    path = tmp_path / "m.toml"
    path.write_text(machine_to_toml(m, header="device\x1b[31m red\rreturn"))
    assert replace(load_machine_file(path), path="") == replace(m, path="")


def test_figures_are_written_short_and_exact() -> None:
    m = catalog()["h100-sxm"]
    text = machine_to_toml(m)
    assert 'bf16 = "989.4 TFLOP/s"' in text and 'bandwidth = "3.35 TB/s"' in text and 'capacity = "80 GiB"' in text
    # a measured figure with no short spelling keeps every digit (it used to be cut to 4)
    odd = replace(m, chip=None, matrix_flop_per_s={"bf16": 1e14 / 3})
    assert parse_machine(tomllib.loads(machine_to_toml(odd))).matrix_flop_per_s["bf16"] == 1e14 / 3
