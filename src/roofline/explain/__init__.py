"""Step-by-step derivations, with the numbers put in: of one placed kernel and of a machine's ridge
points (`placement`), and of a transformer step (`model`: parameters, KV cache, decode limit,
crossover, memory fit).
"""

from roofline.explain.model import explain_kernels, explain_kv, explain_model
from roofline.explain.placement import explain_machine, explain_placement, explain_placements
from roofline.explain.serve import explain_serve

__all__ = ["explain_kernels", "explain_kv", "explain_machine", "explain_model", "explain_placement",
           "explain_placements", "explain_serve"]
