"""Step-by-step derivations for the serving view (`roofline serve --explain`): every number with the
numbers put in, and where each formula comes from.
"""

from __future__ import annotations

from collections.abc import Callable

from roofline.expectation.times import MODEL
from roofline.models.memory import gib
from roofline.serving import KNEE_GAIN, Band, ServingReport
from roofline.serving.chunked import APPROXIMATION as CHUNK_APPROXIMATION
from roofline.serving.chunked import ChunkedPrefill
from roofline.serving.disaggregate import BALANCE_TOLERANCE, Disaggregation
from roofline.serving.speculative import Speculative
from roofline.units import format_time
from roofline.vocab import Bound


def _b(b: Band) -> str:
    return f"{format_time(b.floor)} (expected {format_time(b.low)}–{format_time(b.high)})"


def _by_class(placements: object) -> dict[Bound, float]:
    out = dict.fromkeys(Bound, 0.0)
    for p in placements:  # type: ignore[attr-defined]
        out[Bound(p.bound_class)] += p.total_time_s
    return out


def _expected_lines(r: ServingReport, placements: object, what: str) -> list[str]:
    """The floor by bound class, and the band as Σ runs × each kernel's calibrated band by kind."""
    eff = r.efficiency
    floors = _by_class(placements)
    terms = [(c, t) for c, t in floors.items() if t > 0]
    by_kind: dict[str, list[float]] = {}
    for p in placements:  # type: ignore[attr-defined]
        b = eff.band(p)
        kind = str(b.calibration.get("kind") or b.calibration.get("class") or "kernel")
        sums = by_kind.setdefault(kind, [0.0, 0.0])
        sums[0] += p.count * b.low_s
        sums[1] += p.count * b.high_s
    lines = ["    floor = Σ kernels' floors = " + " + ".join(f"{format_time(t)} {c}-bound" for c, t in terms)
             + f" = {format_time(sum(floors.values()))}"]
    if r.overlap:
        lines.append("    with --overlap the communication runs under the rest: the larger of the two sums")
    lo_sum = " + ".join(f"{format_time(v[0])} {k}" for k, v in by_kind.items())
    hi_sum = " + ".join(f"{format_time(v[1])} {k}" for k, v in by_kind.items())
    lines.append(f"    expected low  = {lo_sum} + {format_time(eff.overhead[0])} overhead")
    lines.append(f"    expected high = {hi_sum} + {format_time(eff.overhead[1])} overhead   ({what})")
    return lines


def explain_serve(r: ServingReport) -> str:
    eff = r.efficiency
    P, O, B = r.prompt, r.output, r.batch
    sp = r.split
    devices = f"{sp.devices} device{'s' if sp.devices > 1 else ''}"
    lines = [r.title, f"    {devices} ({sp}); compute dtype {r.dtype.name}; fusion plan {r.plan}; "
                      f"batch {B}: {r.batch_chosen}", ""]

    lines.append("expected band (every time below is a floor and this band)")
    lines.append("    expected = Σ over kernels of runs × each kernel's calibrated band (as `roofline model` gives it) "
                 "+ per-step overhead")
    lines.append(f"    each kernel: {MODEL}")
    lines.append(f"    calibration file: {eff.source_file or 'none'} ({eff.origin})")
    lines.append(f"    host overhead {format_time(eff.overhead[0])}–{format_time(eff.overhead[1])} a step, "
                 f"{eff.prefill_dispatch_per_layer_s * 1e3:g} ms a layer of each prompt's prefill (added to TTFT): "
                 f"{eff.overhead_source}; --step-overhead overrides the step's; --engine picks the shipped fit, "
                 "--calibration FILE your own")
    lines.append("")

    req = r.requests_prefilled
    lines.append("TTFT (time to first token)")
    lines.append(f"    the prefill step of one request's {P}-token prompt"
                 + (f" (batch {req}: one request per data-parallel replica)" if req > 1 else " at batch 1")
                 + f" = analyze_model(..., 'prefill', {req}, {P}) with split {sp}: per request, no queueing")
    lines += _expected_lines(r, r.prefill.placements, "TTFT")
    lines.append(f"    TTFT = {_b(r.ttft)}")
    lines.append("")

    last = r.decode_analysis()
    lines.append("ITL (inter-token latency)")
    lines.append(f"    the decode step at batch {B} and each context of the generation, {P + 1} … {P + O} "
                 f"(the step model, StepModel.fit(..., split) evaluated with numpy)")
    lines.append(f"    mean over the {O} contexts = {_b(r.itl_mean)}")
    lines.append(f"    last, at context {P + O} = {_b(r.itl_last)}; the graph path, analyze_model(..., 'decode', "
                 f"{B}, {P + O}), gives {format_time(last.time_s)}")
    lines += _expected_lines(r, last.placements, "ITL last")
    lines.append("")

    lines.append("end-to-end latency")
    lines.append(f"    e2e = TTFT + (output − 1) × ITL mean = {format_time(r.ttft.floor)} + {O - 1} × "
                 f"{format_time(r.itl_mean.floor)} = {_b(r.e2e)}")
    lines.append("")

    lines.append("throughput (output tokens/s)")
    if r.pipeline_filled:
        micro = B // sp.dp // sp.pp * sp.dp
        mb = r.itl_at(micro)[0]
        lines.append(f"    {sp.pp} pipeline stages: {sp.pp} micro-batches of {micro} in flight; a micro-batch's "
                     f"tokens leave every stage time (⌈L/pp⌉/L = {r.stage_share:.4g} of its ITL "
                     f"{format_time(mb.floor)})")
        lines.append(f"    system = (batch / pp) / (micro ITL × {r.stage_share:.4g}) = ({B} / {sp.pp}) / "
                     f"{format_time(mb.floor * r.stage_share)} = {r.throughput.ceiling:,.0f} tokens/s (expected "
                     f"{r.throughput.low:,.0f}–{r.throughput.high:,.0f}: the micro-batch ITL's band)")
        lines.append(f"    a sequence's tokens come every pp × {r.stage_share:.4g} × micro ITL = "
                     f"{format_time(mb.floor * r.stage_share * sp.pp)} (the ITL above is the whole batch through "
                     f"the stages in turn)")
    else:
        lines.append(f"    system = batch / ITL mean = {B} / {format_time(r.itl_mean.floor)} = "
                     f"{r.throughput.ceiling:,.0f} tokens/s (expected {r.throughput.low:,.0f}–"
                     f"{r.throughput.high:,.0f}: batch / the band's high and low)")
    lines.append(f"    per device = system / {sp.devices} devices = {r.throughput_per_device.ceiling:,.0f} tokens/s")
    lines.append("")

    lines.append("largest batch that fits memory (per device, with the split)")
    if r.max_batch_memory is None or r.usable_bytes is None:
        lines.append(f"    {r.machine.name} lists no memory capacity: no limit")
    else:
        usable = r.usable_bytes
        room = usable - r.weights_bytes - r.workspace_bytes
        lines.append(f"    usable = {r.utilization:g} × {gib(r.capacity_bytes or 0)} = {gib(usable)}; weights "
                     f"{gib(r.weights_bytes)}; workspace {gib(r.workspace_bytes)} (the prefill's largest kernel "
                     f"activations)")
        lines.append(f"    KV per sequence = {r.kv_bytes_per_token:,.0f} B per token per device × ({P} + {O}) = "
                     f"{gib(r.kv_bytes_per_sequence)}")
        per = int(room // r.kv_bytes_per_sequence)
        dp = f" per device, which is per replica (a device holds its replica's share of each sequence), × {sp.dp} " \
             f"replicas" if sp.dp > 1 else ""
        lines.append(f"    ⌊(usable − weights − workspace) / KV per sequence⌋ = ⌊{gib(room)} / "
                     f"{gib(r.kv_bytes_per_sequence)}⌋ = {per}{dp} → {r.max_batch_memory}")
    lines.append("")

    if r.itl_slo_s is not None and r.max_batch_slo is not None:
        n = r.max_batch_slo
        lines.append(f"largest batch meeting --itl-slo {format_time(r.itl_slo_s)} (ITL mean, floor; binary search)")
        lines.append(f"    batch {n}: ITL mean {format_time(r.itl_at(n)[0].floor, 5)} ≤ {format_time(r.itl_slo_s)}")
        nxt = n + r.batch_unit
        if r.max_batch_memory is not None and nxt > r.max_batch_memory:
            lines.append(f"    batch {nxt} does not fit memory (at most {r.max_batch_memory})")
        else:
            lines.append(f"    batch {nxt}: ITL mean {format_time(r.itl_at(nxt)[0].floor, 5)} > "
                         f"{format_time(r.itl_slo_s)}")
        if r.max_batch_slo_expected is not None:
            lo, hi = r.max_batch_slo_expected
            lines.append(f"    with the expected band's times: {lo or '—'} with its high times, {hi or '—'} with its "
                         f"low times")
        lines.append("")
    if r.goodput is not None:
        lines += _goodput(r)
        lines.append("")

    if r.cost_input is not None and r.cost_output is not None and r.price_per_device_hour is not None:
        price = r.price_per_device_hour
        lines.append("cost per million tokens")
        lines.append(f"    output = price / 3600 × devices / output tokens per s × 1e6 = {price:g} / 3600 × "
                     f"{sp.devices} / {r.throughput.ceiling:,.1f} × 1e6 = {r.cost_output.floor:.4g} (expected "
                     f"{r.cost_output.low:.4g}–{r.cost_output.high:.4g})")
        lines.append(f"    input = price / 3600 × devices × TTFT / (prompt × requests prefilled at once) × 1e6 = "
                     f"{price:g} / 3600 × {sp.devices} × {format_time(r.ttft.floor)} / ({P} × {req}) × 1e6 = "
                     f"{r.cost_input.floor:.4g} (expected {r.cost_input.low:.4g}–{r.cost_input.high:.4g})")
        lines.append("")

    lines.append(f"knee: the smallest curve batch b whose doubling gains < {KNEE_GAIN:.0%} of throughput "
                 f"(roofline ceiling)")
    pts = {p.batch: p for p in r.curve}
    k = r.knee_batch
    if k is not None and 2 * k in pts:
        a, b = pts[k].throughput.ceiling, pts[2 * k].throughput.ceiling
        lines.append(f"    batch {k}: {a:,.0f} tokens/s; batch {2 * k}: {b:,.0f} tokens/s, × {b / a:.3f} < "
                     f"{1 + KNEE_GAIN:g} → knee {k}")
    else:
        lines.append("    every doubling on the curve gains at least that: past the curve")
    lines += what_ifs(r, _chunked, _disaggregated, _speculative)
    return "\n".join(lines)


def what_ifs(r: ServingReport, chunked: Callable[[ServingReport, ChunkedPrefill], list[str]],
             disaggregated: Callable[[ServingReport, Disaggregation], list[str]],
             speculative: Callable[[ServingReport, Speculative], list[str]]) -> list[str]:
    """The what-ifs the report holds, each its own block after a blank line, in the order serve runs them
    (explain's derivations and the text's tables each give the three writers)."""
    lines: list[str] = []
    if r.chunked is not None:
        lines += ["", *chunked(r, r.chunked)]
    if r.disaggregated is not None:
        lines += ["", *disaggregated(r, r.disaggregated)]
    if r.speculative is not None:
        lines += ["", *speculative(r, r.speculative)]
    return lines


def _goodput(r: ServingReport) -> list[str]:
    """goodput's floor at the targets' batch, and each end of its band at the batch the band's times allow."""
    g = r.goodput
    if g is None:
        return []
    slo = r.ttft_slo_s
    if r.itl_slo_s is not None:
        at = (r.max_batch_slo, *(r.max_batch_slo_expected or (None, None)))
        what = "--itl-slo's batch"
    else:
        at = (r.max_batch_memory,) * 3
        what = "the memory's largest batch (no --itl-slo)"
    ttft = "" if slo is None else f"; TTFT {format_time(r.ttft.floor)} ≤ --ttft-slo {format_time(slo)}"
    b0 = at[0] or 1
    how = ("(pp micro-batches in flight, as the throughput above)" if r.split.pp > 1 else
           f"= {b0} / ITL mean {format_time(r.itl_at(b0)[0].floor)}")
    lines = [f"goodput = throughput at {what}{ttft}",
             f"    floor: throughput at batch {b0} {how} = {g.ceiling:,.0f} tokens/s"]
    for end, b, times, ok in (("low", at[1], "high", slo is None or r.ttft.high <= slo),
                              ("high", at[2], "low", slo is None or r.ttft.low <= slo)):
        value = g.low if end == "low" else g.high
        if b is None:
            lines.append(f"    expected {end}: no batch meets the targets with the band's {times} times → 0")
        elif not ok:
            lines.append(f"    expected {end}: TTFT's {times} end misses --ttft-slo {format_time(slo or 0)} → 0")
        else:
            lines.append(f"    expected {end}: throughput at batch {b} (the largest meeting the targets with the "
                         f"band's {times} times) with those times = {value:,.0f} tokens/s")
    return lines


def _chunked(r: ServingReport, c: ChunkedPrefill) -> list[str]:
    n = c.chunks
    lines = [f"what-if: chunked prefill (--chunk {c.chunk}), as vLLM and SGLang schedule it",
             f"    chunks = ⌈prompt / C⌉ = ⌈{c.prompt} / {c.chunk}⌉ = {n}; chunk i holds c_i = min(C, P − i·C) new "
             f"tokens after s_i = i·C earlier ones",
             "    chunk step T(c, s) = prefill step of c tokens (analyze_model(..., 'prefill', 1, c), the same split) "
             "+ the chunk's attention to its s earlier tokens (one flash kernel per layer: c queries against s "
             "cached keys and values, the KV read from memory)"]
    for i, st in enumerate(c.steps):
        att = (f" + attention to {st.earlier} earlier {format_time(st.earlier_attention.floor)} "
               f"({st.earlier_attention_flop / 1e9:,.1f} GFLOP, {st.earlier_attention_bytes / 2**20:,.1f} MiB per "
               f"device)" if st.earlier else "")
        lines.append(f"    chunk {i + 1}: c = {st.tokens}, s = {st.earlier}: prefill "
                     f"{format_time(st.prefill.floor)}{att} = {_b(st.time)}")
    lines.append(f"    TTFT = Σ chunk steps + (chunks − 1) × ITL mean = {format_time(c.prefill_work.floor)} + "
                 f"{n - 1} × {format_time(c.itl.floor)} = {_b(c.ttft)} (the chunks alternate with the batch's "
                 f"decode steps; unchunked {format_time(c.unchunked_ttft.floor)})")
    lines.append(f"    a decode step carrying a chunk = ITL mean + mean chunk step = {format_time(c.itl.floor)} + "
                 f"{format_time(c.prefill_work.floor / n)} = {_b(c.itl_with_chunk)}; worst (the largest chunk) "
                 f"{format_time(c.itl_with_chunk_worst.floor)}; unchunked, the step admitting a prompt stalls "
                 f"ITL + TTFT = {format_time(c.itl_unchunked_stall.floor)}")
    lines.append(f"    steady state: each step admits batch / output = {c.batch} / {c.output} requests, so ITL = "
                 f"{format_time(c.itl.floor)} + {c.batch / c.output:.4g} × {format_time(c.prefill_work.floor)} = "
                 f"{_b(c.itl_steady)}")
    lines.append(f"    {CHUNK_APPROXIMATION}")
    return lines


def _disaggregated(r: ServingReport, d: Disaggregation) -> list[str]:
    lines = [f"what-if: prefill/decode disaggregation (--disaggregate {d.prefill_devices}:{d.decode_devices}); each "
             f"group tensor parallel inside a node and pipeline parallel across nodes ({d.prefill_split} and "
             f"{d.decode_split}; the "
             f"--tp/--pp/--ep/--dp flags are not used by the groups)",
             f"    prefill = the prefill step of one prompt on {d.prefill_split} at batch 1 = {_b(d.prefill)}",
             f"    KV per token per prefill device = {d.kv_bytes_per_token_device:,.0f} B (its share of the KV heads); "
             f"× {d.prompt} tokens = {d.kv_bytes / 2**20:,.1f} MiB, every prefill device sending its share at once",
             f"    transfer = α + bytes / BW = {format_time(d.link_latency_s)} + {d.kv_bytes:,.0f} B / "
             f"{d.link_bytes_per_s / 1e9:,.1f} GB/s ({d.link_name}, {d.link_level}, per direction) = {_b(d.transfer)} "
             f"(expected: the bandwidth × {r.efficiency.communication[0]:g}–{r.efficiency.communication[1]:g}, a "
             f"constant: no measured table has a KV transfer)",
             f"    TTFT = prefill + transfer = {_b(d.ttft)}",
             f"    ITL = the decode step on {d.decode_split} at batch {d.batch}: mean {_b(d.itl_mean)}, last "
             f"{_b(d.itl_last)}",
             f"    e2e = TTFT + (output − 1) × ITL mean = {_b(d.e2e)}",
             f"    prefill requests/s = 1 / prefill = {d.prefill_rps.ceiling:.4g}; decode requests/s = batch / (output"
             f" × ITL mean) = {d.batch} / ({d.output} × {format_time(d.itl_mean.floor)}) = {d.decode_rps.ceiling:.4g}"]
    b = d.balanced
    if b is not None and b.prefill_rps is not None and b.decode_rps is not None:
        rule = ("of the pairs whose rates are within 10% (|log(prefill / decode)| ≤ log 1.1), the most requests/s "
                "per device" if b.imbalance <= BALANCE_TOLERANCE else "no pair within 10%: the smallest "
                "|log(prefill / decode)|")
        lines.append(f"    balance: of the pairs (p, d) of group sizes with p + d ≤ the system's devices, "
                     f"{b.prefill_devices}:{b.decode_devices} ({rule}): prefill {b.prefill_rps.ceiling:.4g} req/s, "
                     f"decode {b.decode_rps.ceiling:.4g} req/s, |log(prefill / decode)| = {b.imbalance:.3g}, "
                     f"{b.rps.ceiling / (b.prefill_devices + b.decode_devices):.4g} req/s per device" if b.rps else "")
    skipped = [p for p in d.pairs if p.rps is None]
    if skipped:
        lines.append(f"    {len(skipped)} pairs cannot run (e.g. {skipped[0].prefill_devices}:"
                     f"{skipped[0].decode_devices}: {skipped[0].reason})")
    return lines


def _speculative(r: ServingReport, s: Speculative) -> list[str]:
    k, a = s.draft_tokens, s.acceptance
    e = (f"(1 − {a:g}^{k + 1}) / (1 − {a:g}) = {s.expected_tokens:.5g}" if a < 1
         else f"the limit a → 1: k + 1 = {k + 1}")
    v = s.verify
    return [f"what-if: speculative decoding (--draft {s.draft} --draft-tokens {k} --acceptance {a:g})",
            f"    expected tokens per target step = (1 − a^(k+1)) / (1 − a) = {e} (Leviathan, Kalman and Matias, "
            f"ICML 2023)",
            f"    draft step = {s.draft}'s decode step at batch {s.batch} on the same split, ITL mean over the "
            f"generation = {_b(s.draft_step)}",
            f"    verify step = prefill of k + 1 = {k + 1} tokens at batch {s.batch} {format_time(v.prefill.floor)} + "
            f"their attention to {v.earlier} cached tokens (prompt + ⌊output / 2⌋) "
            f"{format_time(v.earlier_attention.floor)} = {_b(s.verify_step)}",
            f"    net ITL = (k × draft + verify) / tokens per step = ({k} × {format_time(s.draft_step.floor)} + "
            f"{format_time(s.verify_step.floor)}) / {s.expected_tokens:.5g} = {_b(s.net_itl)}",
            f"    against the decode step's ITL mean {format_time(s.target_itl.floor)}: × {s.speedup:.3g}; "
            f"throughput = batch / net ITL = {s.throughput.ceiling:,.0f} tokens/s",
            *_spec_memory(r)]


def _spec_memory(r: ServingReport) -> list[str]:
    s = r.speculative
    if s is None or s.max_batch_memory is None or r.usable_bytes is None:
        return []
    g = 2**30
    room = r.usable_bytes - r.weights_bytes - s.draft_weights_bytes - s.workspace_bytes
    kv = r.kv_bytes_per_sequence + s.draft_kv_bytes_per_sequence
    return [f"    memory with the draft = (usable {r.usable_bytes / g:.4g} GiB − target weights "
            f"{r.weights_bytes / g:.4g} GiB − draft weights {s.draft_weights_bytes / g:.4g} GiB − workspace "
            f"{s.workspace_bytes / g:.3g} GiB, the larger step's) / (target KV "
            f"{r.kv_bytes_per_sequence / 2**20:.4g} MiB + draft KV "
            f"{s.draft_kv_bytes_per_sequence / 2**20:.4g} MiB a sequence) = {max(room, 0) / kv:,.1f} → "
            f"at most {s.max_batch_memory} sequences (a multiple of the batch unit {r.batch_unit}); batch {s.batch} "
            + ("fits" if s.fits else "does NOT fit")]


__all__ = ["explain_serve"]
