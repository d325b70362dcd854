"""Nsight Compute's raw CSV counted once per op (issue 11, a second look).

ncu lists a tensor-path total per source/destination dtype pair (sm__ops_path_tensor_src_bf16_dst_fp32,
"# of math ops executed in Tensor path" in `ncu --query-metrics`) and breakdowns of the same ops
(…_sparsity_on/off, …_op_hmma_…); the sm__ and smsp__ spellings of a SASS thread-instruction counter are
one count. A CSV collected with a regex (`--metrics regex:sm__ops_path_tensor_.*`) holds several: each
op must be added once. FMA = 2 FLOPs, as ncu's roofline sections count it (ffma × 2).
"""

from __future__ import annotations

from roofline.tracing.ncu import parse_ncu_csv, sass_columns, tensor_columns
from roofline.vocab import Unit

# --- Nsight Compute: each op counted once ---------------------------------------------------------------

def _csv(columns: dict[str, tuple[str, str]]) -> str:
    """A raw-page CSV of one kernel: the identifying columns, then each metric's (unit, value)."""
    names = ["ID", "Kernel Name", *columns]
    units = ["", "", *(u for u, _ in columns.values())]
    values = ["0", "sm90_xmma_gemm_bf16bf16_bf16f32", *(v for _, v in columns.values())]
    return "\n".join(",".join(f'"{c}"' for c in row) for row in (names, units, values)) + "\n"


BASE = {"gpu__time_duration.sum": ("usecond", "100"), "dram__bytes_read.sum": ("Mbyte", "10"),
        "dram__bytes_write.sum": ("Mbyte", "5")}


def test_ncu_tensor_breakdowns_are_not_added_to_their_total() -> None:
    # a 1024³ bf16 GEMM: 2·1024³ = 2,147,483,648 tensor-path ops in the total column; the same ops again in
    # its _sparsity_off breakdown (and 0 in _sparsity_on) and in the op_hmma breakdown: counted once
    total = 2 * 1024**3
    cols = {**BASE,
            "sm__ops_path_tensor_src_bf16_dst_fp32.sum": ("inst", str(total)),
            "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum": ("inst", str(total)),
            "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on.sum": ("inst", "0"),
            "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum": ("inst", str(total))}
    (k,) = parse_ncu_csv(_csv(cols))
    assert k.flop_by_unit[Unit.MATRIX] == total
    assert tensor_columns(list(cols)) == ["sm__ops_path_tensor_src_bf16_dst_fp32.sum"]


def test_ncu_tensor_breakdowns_alone_are_summed_and_pairs_add() -> None:
    # only the sparsity split of one pair (3 + 1 = 4 ops) and a second pair (fp16 -> fp32, 10 ops): 14
    cols = {**BASE,
            "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum": ("inst", "3"),
            "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on.sum": ("inst", "1"),
            "sm__ops_path_tensor_src_fp16_dst_fp32.sum": ("inst", "10")}
    (k,) = parse_ncu_csv(_csv(cols))
    assert k.flop_by_unit[Unit.MATRIX] == 3 + 1 + 10


def test_ncu_smsp_spelling_counts_and_is_never_added_twice() -> None:
    # the smsp__ spelling ncu's roofline sections use: 2·ffma + fadd = 2·1,000 + 500 = 2,500 FLOPs
    smsp = {**BASE, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", "1,000"),
            "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": ("inst", "500")}
    (k,) = parse_ncu_csv(_csv(smsp))
    assert k.flop_by_unit[Unit.VECTOR] == 2 * 1000 + 500
    # both spellings of ffma present (one count): 2·1,000, not 2·2,000
    both = {**BASE, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", "1000"),
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", "1000")}
    (k,) = parse_ncu_csv(_csv(both))
    assert k.flop_by_unit[Unit.VECTOR] == 2 * 1000
    assert sass_columns(list(both)) == {"ffma": "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"}


def test_ncu_gemm_with_no_tensor_ops_is_said_to_be_unknown_not_zero() -> None:
    from roofline.tracing.ncu import ncu_profile

    cols = {**BASE, "sm__ops_path_tensor_src_bf16_dst_fp32.sum": ("inst", "0")}
    p = ncu_profile(parse_ncu_csv(_csv(cols)), "k.csv")
    assert any("1 kernel named as a GEMM counted 0 tensor-path ops" in n for n in p.notes)


def test_the_details_page_ncu_prints_without_page_raw_is_read_too() -> None:
    # `ncu --csv --metrics ...` without --page raw: one row per (kernel, metric), each value in a unit ncu
    # picked for it (as exports in the wild show: "ns", "usecond", "msecond", "Kbyte", "Mbyte")
    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
            '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')

    def row(kid: str, kernel: str, metric: str, unit: str, value: str) -> str:
        return (f'"{kid}","42","python","h","{kernel}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0",'
                f'"Command line profiler metrics","{metric}","{unit}","{value}"')

    text = "\n".join([
        "==PROF== Connected to process 42 (python)", head,
        row("0", "gemm_bf16", "dram__bytes_read.sum", "Mbyte", "67.11"),
        row("0", "gemm_bf16", "dram__bytes_write.sum", "Kbyte", "1,024"),
        row("0", "gemm_bf16", "gpu__time_duration.sum", "usecond", "180.50"),
        row("0", "gemm_bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "", "137,438,953,472"),
        row("1", "add_kernel", "dram__bytes_read.sum", "byte", "2,048"),
        row("1", "add_kernel", "dram__bytes_write.sum", "byte", "1,024"),
        row("1", "add_kernel", "gpu__time_duration.sum", "ns", "4,160"),
    ]) + "\n"
    gemm, add = parse_ncu_csv(text)
    assert (gemm.name, add.name) == ("gemm_bf16", "add_kernel")
    assert gemm.time_s == 180.50e-6 and add.time_s == 4160e-9  # each row's own unit
    assert gemm.bytes_by_level["dram"] == 67.11e6 + 1024e3  # Mbyte and Kbyte, decimal
    assert add.bytes_by_level["dram"] == 2048 + 1024
    assert gemm.flop_by_unit[Unit.MATRIX] == 2 * 4096**3  # 137,438,953,472 tensor-path ops
