"""Step-by-step derivations, with the numbers put in: of one placed kernel and of a machine's ridge
points (`placement`), and of a transformer step (`model`: parameters, KV cache, decode limit,
crossover, memory fit).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roofline.explain.model import explain_kernels, explain_kv, explain_model
    from roofline.explain.placement import explain_machine, explain_placement, explain_placements
    from roofline.explain.serve import explain_serve

_MODEL = ("explain_kernels", "explain_kv", "explain_model")
_PLACEMENT = ("explain_machine", "explain_placement", "explain_placements")


def __getattr__(name: str) -> Any:
    """Each derivation's module is imported when first asked for (a kernel's needs no serving model)."""
    if name in _MODEL:
        from roofline.explain import model as module
    elif name in _PLACEMENT:
        from roofline.explain import placement as module  # type: ignore[no-redef]
    elif name == "explain_serve":
        from roofline.explain import serve as module  # type: ignore[no-redef]
    else:
        raise AttributeError(f"module 'roofline.explain' has no attribute {name!r}")
    return getattr(module, name)


__all__ = ["explain_kernels", "explain_kv", "explain_machine", "explain_model", "explain_placement",
           "explain_placements", "explain_serve"]
