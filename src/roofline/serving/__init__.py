"""The serving view: time to first token, inter-token latency, throughput against latency, the
batches memory and a latency target allow, and cost per million tokens, each a roofline floor and an
expected band.

    from roofline.serving import serve, serve_model
    r = serve_model("llama-3-70b", "dgx-h100", Split(tp=8), prompt=2048, output=256, itl_slo_s=0.03)
    r = serve(describe_step("llama-3-70b", "prefill", 1, 2048), deploy("dgx-h100", Split(tp=8)), output=256)
    r.ttft.floor, r.itl_mean, r.max_batch_slo, r.to_dict()

Modules:
    efficiency  Efficiency (the shares of the roofline kernels reach, the per-step overhead), Band, Rate
    serve       serve() and ServingReport: TTFT, ITL, e2e, throughput, memory and SLO batches, cost, curve
    chunked     what-if --chunk C: the prompt's prefill in chunks interleaved with decode steps (vLLM, SGLang)
    disaggregate  what-if --disaggregate P:D: prefill and decode on separate groups, the KV cache over the link
    speculative what-if --draft: expected tokens per target step (Leviathan et al. 2023), draft and verify cost

numpy is imported only inside functions.
"""

from roofline.serving.efficiency import Band, Efficiency, Rate
from roofline.serving.serve import CURVE_MAX_BATCH, FORMULAS, KNEE_GAIN, CurvePoint, ServingReport, serve, serve_model

__all__ = ["CURVE_MAX_BATCH", "FORMULAS", "KNEE_GAIN", "Band", "CurvePoint", "Efficiency", "Rate", "ServingReport",
           "serve", "serve_model"]
