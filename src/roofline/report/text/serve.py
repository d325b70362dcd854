"""Text for the serving view (`roofline serve`): a summary block, then the throughput-latency curve with
the knee, the memory limit and the ITL target marked; and the curve as CSV.

Every time reads "floor (expected low–high)": the floor is the roofline, the band what kernels at the
usual efficiencies reach (roofline.serving.efficiency). Plain text, no rich: `serve` must start fast.
"""

from __future__ import annotations

from roofline.explain.serve import what_ifs
from roofline.models.memory import gib
from roofline.serving import KNEE_GAIN, Band, Rate, ServingReport
from roofline.serving.chunked import APPROXIMATION as CHUNK_APPROXIMATION
from roofline.serving.chunked import ChunkedPrefill
from roofline.serving.disaggregate import BALANCE_TOLERANCE, Disaggregation
from roofline.serving.speculative import Speculative
from roofline.units import format_time

CURVE_CSV_COLUMNS = ("batch", "itl_s", "itl_expected_low_s", "itl_expected_high_s", "throughput_tokens_per_s",
                     "throughput_expected_low", "throughput_expected_high", "fits", "meets_itl_slo")


def band(b: Band) -> str:
    return f"{format_time(b.floor)} (expected {format_time(b.low)}–{format_time(b.high)})"


def rate(r: Rate, unit: str = "tokens/s") -> str:
    return f"{r.ceiling:,.0f} {unit} (expected {r.low:,.0f}–{r.high:,.0f})"


def money(b: Band) -> str:
    return f"{b.floor:.3g} (expected {b.low:.3g}–{b.high:.3g})"


def _searched(r: ServingReport) -> list[str]:
    """No split given: which layouts were tried and why this one (roofline.serving.splits)."""
    s = r.split_search
    if s is None:
        return []
    lines = [f"    split: {r.split}, the cheapest of {len(s.candidates)} engine layouts (TP in a node, PP across "
             f"nodes) meeting the targets: devices / expected tokens/s"]
    for c in s.candidates[1:6]:
        lines.append(f"      {c.split!s:<14} {c.reason}")
    return lines


def serve_text(r: ServingReport) -> str:
    lines = [r.title,
             f"    {r.devices} device{'s' if r.devices > 1 else ''}; batch {r.batch}: {r.batch_chosen}; times are the "
             f"roofline floor (expected band: {r.efficiency.label})", *_searched(r), ""]
    rows = [("TTFT", band(r.ttft) + "  per request: the prompt's prefill at batch 1, no queueing"),
            ("ITL mean", band(r.itl_mean) + f"  over contexts {r.prompt + 1}–{r.context}" + _pipelined_itl(r)),
            ("ITL last", band(r.itl_last) + f"  at context {r.context}"),
            ("end-to-end", band(r.e2e) + f"  TTFT + {r.output - 1} × ITL mean"),
            ("throughput", rate(r.throughput) + "  output tokens over the run, prefill counted, every replica"
             + (", pp micro-batches in flight" if r.pipeline_filled else "")
             + ("" if r.decode_throughput is None else f"; decode alone {rate(r.decode_throughput)}")),
            ("  per device", rate(r.throughput_per_device))]
    usable = r.usable_bytes
    if r.max_batch_memory is not None and usable is not None:
        rows.append(("max batch (memory)", f"{r.max_batch_memory}  {max_batch_formula(r)}"))
    if r.itl_slo_s is not None:
        exp = r.max_batch_slo_expected
        tail = "" if exp is None else f"  (expected {exp[0] or '—'}–{exp[1] or '—'})"
        beyond = [p.batch for p in r.curve if p.fits is False and p.meets_slo]
        if beyond and r.max_batch_slo == r.max_batch_memory:
            tail += f"; memory binds first: the ITL target alone allows at least batch {max(beyond)}"
        rows.append(("max batch (ITL SLO)", f"{r.max_batch_slo}  ITL mean ≤ {format_time(r.itl_slo_s)}{tail}"))
    if r.ttft_slo_s is not None:
        rows.append(("TTFT SLO", f"{format_time(r.ttft_slo_s)}: met at the floor"
                     + ("" if r.ttft.high <= r.ttft_slo_s else f"; the expected high {format_time(r.ttft.high)} "
                                                               f"misses it")))
    if r.goodput is not None:
        rows.append(("goodput", rate(r.goodput) + "  " + goodput_note(r)))
    if r.cost_input is not None and r.cost_output is not None:
        rows.append(("cost / 1M input", money(r.cost_input) + f"  at {r.price_per_device_hour:g} per device-hour"))
        rows.append(("cost / 1M output", money(r.cost_output) + f"  at batch {r.batch}"))
    width = max(len(k) for k, _ in rows)
    lines += [f"{k:<{width}}  {v}" for k, v in rows]
    lines += what_ifs(r, _chunked, _disaggregated, _speculative)
    lines += ["", _curve(r)]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def _pipelined_itl(r: ServingReport) -> str:
    """With pp micro-batches in flight (the throughput's count), the interval a sequence sees between its
    tokens: pp stage steps of its micro-batch, pp × ⌈L/pp⌉/L × the micro-batch's ITL."""
    if not r.pipeline_filled:
        return ""
    sp = r.split
    micro = r.batch // sp.dp // sp.pp * sp.dp
    every = r.itl_at(micro)[0].scaled(sp.pp * r.stage_share)
    return (f"; the whole batch through the {sp.pp} stages in turn (with {sp.pp} micro-batches of {micro} in "
            f"flight, as the throughput counts them, a sequence's tokens come every {format_time(every.floor)})")


def goodput_note(r: ServingReport) -> str:
    """Where goodput's floor and band come from: the batch meeting the targets at each end of the band."""
    if r.itl_slo_s is None:
        return f"at batch {r.max_batch_memory} (the memory's), within --ttft-slo"
    exp = r.max_batch_slo_expected or (None, None)
    return (f"at batch {r.max_batch_slo}, within the targets (expected: at batch {exp[0] or '—'} with the band's "
            f"high times, {exp[1] or '—'} with its low)")


def max_batch_note(r: ServingReport) -> str:
    """How the memory's largest batch is counted: per device, and per replica × dp with data parallelism."""
    dp = r.split.dp
    return "per device" + (f"; a device holds its replica's share of each sequence: × {dp} replicas" if dp > 1
                           else "")


def max_batch_formula(r: ServingReport) -> str:
    """The memory's largest batch as it is computed (roofline.models.memory.sequences_that_fit), each
    step's figure printed: ⌊(usable − weights − workspace) / KV per sequence⌋ sequences a device holds,
    which is what its replica holds (each device of a replica keeps its share of every sequence's KV
    cache), rounded down to the batch unit's share of a replica, × dp replicas."""
    usable = r.usable_bytes or 0.0
    room = usable - r.weights_bytes - r.workspace_bytes
    raw = int(room // r.kv_bytes_per_sequence) if room > 0 else 0
    dp, share = r.split.dp, r.batch_unit // r.split.dp
    text = (f"= ⌊(usable {gib(usable)} − weights {gib(r.weights_bytes)} − workspace {gib(r.workspace_bytes)}) / KV "
            f"{gib(r.kv_bytes_per_sequence)} per sequence of {r.context} tokens⌋ = {raw} per device")
    per = raw // share * share
    if per != raw:
        text += f", rounded down to a multiple of {share} (each tp rank routes 1/tp of a replica's tokens): {per}"
    if dp > 1:
        text += f"; a device holds its replica's share of each sequence: {per} a replica × {dp} replicas"
    return text


def _rps(r: Rate) -> str:
    return f"{r.ceiling:.3g} req/s (expected {r.low:.3g}–{r.high:.3g})"


def _table(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(k) for k, _ in rows)
    return [f"  {k:<{width}}  {v}" for k, v in rows]


def _chunked(r: ServingReport, c: ChunkedPrefill) -> list[str]:
    head = (f"what-if: chunked prefill, {c.chunks} chunk{'s' if c.chunks > 1 else ''} of ≤ {c.chunk} tokens "
            f"interleaved with decode steps (vLLM, SGLang)")
    rows = [("TTFT", band(c.ttft) + f"  Σ {c.chunks} chunk steps {format_time(c.prefill_work.floor)} + "
             f"{c.chunks - 1} × ITL {format_time(c.itl.floor)}; unchunked {format_time(c.unchunked_ttft.floor)}"),
            ("ITL with a chunk", band(c.itl_with_chunk) + f"  ITL + the mean chunk step (worst "
             f"{format_time(c.itl_with_chunk_worst.floor)}); unchunked, the admitting step stalls "
             f"{format_time(c.itl_unchunked_stall.floor)}"),
            ("ITL steady state", band(c.itl_steady) + f"  ITL + (batch {c.batch} / output {c.output}) × Σ chunk "
             f"steps")]
    return [head, *_table(rows), f"  ({CHUNK_APPROXIMATION})"]


def _disaggregated(r: ServingReport, d: Disaggregation) -> list[str]:
    head = (f"what-if: prefill on {d.prefill_devices} device{'s' if d.prefill_devices > 1 else ''} "
            f"({d.prefill_split}), decode on {d.decode_devices} ({d.decode_split}), KV cache over the "
            f"{d.link_level}")
    rows = [("prefill", band(d.prefill)),
            ("KV transfer", band(d.transfer) + f"  α {format_time(d.link_latency_s)} + {d.prompt} tokens × "
             f"{d.kv_bytes_per_token_device:,.0f} B per device / {d.link_bytes_per_s / 1e9:,.0f} GB/s "
             f"({d.link_name})"),
            ("TTFT", band(d.ttft) + "  prefill + transfer"),
            ("ITL mean", band(d.itl_mean) + f"  decode group at batch {d.batch}"),
            ("ITL last", band(d.itl_last)),
            ("end-to-end", band(d.e2e)),
            ("requests/s", f"prefill {_rps(d.prefill_rps)}; decode {_rps(d.decode_rps)}  1 / prefill; batch / "
             f"(output × ITL mean)")]
    b = d.balanced
    if b is not None and b.prefill_rps is not None and b.decode_rps is not None:
        rows.append(("balanced P:D", f"{b.prefill_devices}:{b.decode_devices}  prefill "
                     f"{b.prefill_rps.ceiling:,.3g} req/s, decode {b.decode_rps.ceiling:,.3g} req/s ("
                     + ("the most req/s per device of the pairs within 10%" if b.imbalance <= BALANCE_TOLERANCE
                        else "no pair within 10%: the closest")
                     + f"; {sum(1 for p in d.pairs if p.rps is not None)} pairs run)"))
    return [head, *_table(rows)]


def _speculative(r: ServingReport, s: Speculative) -> list[str]:
    head = (f"what-if: speculative decoding, draft {s.draft} (same split), k = {s.draft_tokens}, acceptance "
            f"{s.acceptance:g}")
    rows = [("tokens per step", f"{s.expected_tokens:.4g}  (1 − a^(k+1)) / (1 − a), Leviathan et al. 2023"),
            ("draft step", band(s.draft_step) + f"  the draft's decode at batch {s.batch}"),
            ("verify step", band(s.verify_step) + f"  {s.draft_tokens + 1} tokens a sequence against "
             f"{s.verify.earlier} cached"),
            ("net ITL", band(s.net_itl) + f"  ({s.draft_tokens} × draft + verify) / {s.expected_tokens:.4g}; "
             f"× {s.speedup:.2f} against ITL {format_time(s.target_itl.floor)}"),
            ("throughput", rate(s.throughput))]
    if s.max_batch_memory is not None:
        verdict = "fits" if s.fits else "does NOT fit"
        rows.append(("memory", f"batch {s.batch} {verdict}: at most {s.max_batch_memory} with the draft's weights "
                     f"{s.draft_weights_bytes / 2**30:.3g} GiB + KV {s.draft_kv_bytes_per_sequence / 2**20:.3g} MiB "
                     f"a sequence beside the target's, per device"))
    return [head, *_table(rows)]


def _curve(r: ServingReport) -> str:
    head = ("batch", "ITL mean", "expected", "tokens/s", "expected", "tokens/s/device", "fits", "")
    table: list[tuple[str, ...]] = []
    # the SLO's mark on the largest batch of the curve meeting it at or below the limit (the ITL can fall
    # past a batch that misses: the all-reduce's algorithm changes with its size)
    slo_row = max((p.batch for p in r.curve if p.meets_slo and p.batch <= (r.max_batch_slo or 0)), default=None)
    for p in r.curve:
        marks = []
        if p.batch == r.knee_batch:
            marks.append(f"knee (doubling past it gains < {KNEE_GAIN:.0%})")
        if r.max_batch_memory is not None and p.fits and p.batch * 2 > r.max_batch_memory:
            marks.append(f"memory limit at {r.max_batch_memory}")
        if p.meets_slo and p.batch == slo_row:
            marks.append(f"ITL SLO limit at {r.max_batch_slo}")
        if p.batch == r.batch:
            marks.append("← batch")
        table.append((str(p.batch), format_time(p.itl.floor),
                      f"{format_time(p.itl.low)}–{format_time(p.itl.high)}", f"{p.throughput.ceiling:,.0f}",
                      f"{p.throughput.low:,.0f}–{p.throughput.high:,.0f}",
                      f"{p.throughput.ceiling / r.devices:,.0f}",
                      {True: "yes", False: "no", None: "?"}[p.fits], "; ".join(marks)))
    widths = [max(len(row[i]) for row in (head, *table)) for i in range(len(head))]

    def fmt(row: tuple[str, ...]) -> str:
        cells = [row[0].rjust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:-2], widths[1:-2], strict=True)),
                 row[-2].ljust(widths[-2]), row[-1]]
        return "  ".join(cells).rstrip()

    title = (f"throughput against latency over batch (floor; expected band), prompt {r.prompt}, output {r.output}; "
             f"knee: {r.knee_batch if r.knee_batch is not None else 'past the curve'}")
    return "\n".join([title, fmt(head), *(fmt(row) for row in table)])


def serve_csv(r: ServingReport) -> str:
    rows = [{"batch": p.batch, "itl_s": p.itl.floor, "itl_expected_low_s": p.itl.low,
             "itl_expected_high_s": p.itl.high, "throughput_tokens_per_s": p.throughput.ceiling,
             "throughput_expected_low": p.throughput.low, "throughput_expected_high": p.throughput.high,
             "fits": p.fits, "meets_itl_slo": p.meets_slo} for p in r.curve]
    from roofline.report.text.csvcells import csv_text

    return csv_text(CURVE_CSV_COLUMNS, ([row.get(k) for k in CURVE_CSV_COLUMNS] for row in rows))


__all__ = ["CURVE_CSV_COLUMNS", "goodput_note", "max_batch_formula", "max_batch_note", "serve_csv", "serve_text"]
