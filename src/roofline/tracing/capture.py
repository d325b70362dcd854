"""The tracer's hot path: what each ATen call is, taken down while the program runs, and nothing more.

The recorder (roofline.tracing.recorder) works in two steps. While the program runs, each call the
TorchDispatchMode sees is written down here as it came: the op overload, its arguments with every
tensor replaced by a `Seen` (a token for the live tensor, its shape, strides, torch dtype, version
counter, and the parameter name it had at that moment), the module running it, its time. No name is
made, no string formatted, no formula run. When the traced block ends, the recorder replays the
calls in order and builds the graph exactly as it would have from the live tensors: every fact it
reads off a tensor is one written down here at the call, after the op returned (where the live
recorder read it too).

The few facts that need a tensor's values, not its shape, are read at the call, only for the ops
that use them: the attention backend PyTorch picks for scaled_dot_product_attention
(torch._fused_sdp_choice), the pairs an attention mask keeps (its values), a grouped matmul's
offsets, and, once the program has run a 4-D matmul (eager attention's q·kᵀ), the elements an
added tensor keeps (eager attention's mask). Storage pointers (the alias test) are read only for
ops whose schema returns an alias or writes an argument, or that return an argument itself.

Identity: a live tensor keeps one token while it lives (a weak reference tells a new tensor from
a dead one that had the same id), as the live recorder's weak dictionary did.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any


class Seen:
    """A tensor as one call saw it: what the replay asks of it, answered as a live tensor would have
    answered right after the op returned. One per tensor per call (a tensor that is both an argument
    and the result is the same Seen, so identity tests hold); `token` is the live tensor's identity."""

    __slots__ = ("dtype", "is_param", "keeps", "param", "ptr", "shape", "strides", "token", "values", "version")

    def __init__(self, token: int, shape: tuple[int, ...], strides: tuple[int, ...] | None, dtype: Any,
                 version: int, param: str | None, is_param: bool) -> None:
        self.token = token
        self.shape = shape  # a torch.Size (a tuple), as the tensor gave it
        self.strides = strides
        self.dtype = dtype
        self.version = version  # -1: an inference tensor (no counter) or one without a version
        self.param = param  # the parameter path it had when the call ran, if any
        self.is_param = is_param  # a torch.nn.Parameter
        self.ptr: int | None = None  # its storage's address, read where the alias test needs it
        self.keeps: int | None = None  # the elements a mask keeps, read where a formula needs them
        self.values: tuple[int, ...] | None = None  # a small index tensor's values (grouped matmul offsets)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_floating_point(self) -> bool:
        return bool(self.dtype.is_floating_point)


def _version(t: Any) -> int:
    """A tensor's version counter; never asked of an inference tensor (it keeps none: asking raises, slowly)."""
    try:
        return int(t._version)
    except RuntimeError:
        return -1


def _storage_ptr(t: Any) -> int | None:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return None


def _sdp_runs_fused(bound: Mapping[str, Any]) -> bool:
    """Whether PyTorch runs this scaled_dot_product_attention call on a fused backend (flash,
    efficient, cuDNN): 0 from torch._fused_sdp_choice is the math backend, which writes the scores."""
    import torch

    try:
        choice = torch._fused_sdp_choice(bound["query"], bound["key"], bound["value"], bound.get("attn_mask"),
                                         float(bound.get("dropout_p", 0.0) or 0.0), bool(bound.get("is_causal", False)),
                                         scale=bound.get("scale"), enable_gqa=bool(bound.get("enable_gqa", False)))
        return int(choice) != 0
    except (RuntimeError, TypeError, AttributeError, KeyError):
        return True


def mask_keeps(mask: Any) -> int:
    """The elements of an attention mask that keep their pair: True in a boolean mask; above half the
    dtype's lowest value in an additive one (PyTorch and Hugging Face mask with -inf or that lowest value)."""
    import torch

    if mask.dtype == torch.bool:
        return int(mask.sum())
    if mask.is_floating_point():
        return int((mask > torch.finfo(mask.dtype).min / 2).sum())
    return int(mask.numel())


class Capture:
    """The calls of one traced block, written down as they run, for the recorder to replay. `log`
    holds, in order: a call (schema, arguments, keyword arguments, result, module path or None,
    seconds or None, whether it ran fused), or ("error", op, exception), a call the hot path failed on."""

    def __init__(self, schema: Callable[[Any], Any], schemas: Mapping[int, tuple[Any, Any]],
                 param_names: Mapping[int, str], path: list[str]) -> None:
        import torch

        self.tensor_type = torch.Tensor
        self.parameter_type = torch.nn.Parameter
        self.schema = schema  # the recorder's: what an op overload is, worked out once
        self.schemas = schemas  # its cache: id(op overload) -> (it, what it is)
        self.param_names = param_names  # id(tensor) -> its parameter path (the recorder fills it)
        self.path = path  # the module paths running now (the recorder's module hooks keep it)
        self.tokens: dict[int, tuple[Any, int]] = {}  # id(live tensor) -> (weak reference, token)
        self.next_token = 0
        self.log: list[Any] = []
        self.scores_possible = False  # a 4-D matmul ran: an added tensor may be eager attention's mask

    def token(self, t: Any) -> int | None:
        """The token of a live tensor already seen, None if it was never seen (or died since)."""
        known = self.tokens.get(id(t))
        return known[1] if known is not None and _alive(known[0]) is t else None

    def forget(self, t: Any) -> None:
        """A tensor the recorder must meet afresh (a weight its module has just named): its next call
        sees it as a new tensor (a new token, its parameter name read then)."""
        if self.token(t) is not None:
            del self.tokens[id(t)]

    def error(self, func: Any, exc: Exception) -> None:
        self.log.append(("error", str(func), exc))

    def call(self, func: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any,
             seconds: float | None) -> None:
        """One call, after the op returned: its arguments and results with each tensor a Seen."""
        known = self.schemas.get(id(func))  # the recorder's cache, read here without a call
        sch = known[1] if known is not None else self.schema(func)
        seen: dict[int, Seen] = {}  # id(live tensor) -> its Seen in this call
        lives: list[Any] = []  # the live tensors, for the storage addresses (dropped on return: no cycle)
        tensor_type = self.tensor_type
        snap = self._snap
        s_args = tuple([snap(a, seen, lives) if isinstance(a, tensor_type) else
                        (snap(a, seen, lives) if isinstance(a, (list, tuple)) else a) for a in args])
        s_kwargs = {k: snap(v, seen, lives) for k, v in kwargs.items()} if kwargs else kwargs
        before = len(seen)
        s_out = snap(out, seen, lives)
        # the alias test reads storage addresses: for views, writes, and a result that is an argument
        if sch.needs_ptrs or len(seen) - before < (1 if type(s_out) is Seen else _count(s_out)):
            for v in lives:
                seen[id(v)].ptr = _storage_ptr(v)
        fused = False
        if sch.needs_values or (sch.adds and self.scores_possible):
            fused = self._values(sch, args, kwargs, seen)
        if sch.score_matmul and isinstance(out, tensor_type) and out.dim() == 4:
            self.scores_possible = True
        self.log.append((sch, s_args, s_kwargs, s_out, self.path[-1] if self.path else None, seconds, fused))

    def _snap(self, v: Any, seen: dict[int, Seen], lives: list[Any]) -> Any:
        """An argument or result with each tensor a Seen (a list as a tuple)."""
        if isinstance(v, self.tensor_type):
            i = id(v)
            s = seen.get(i)
            if s is not None:
                return s
            known = self.tokens.get(i)
            try:
                strides: tuple[int, ...] | None = v.stride()
            except (RuntimeError, NotImplementedError):  # sparse and other layouts without strides
                strides = None
            version = -1 if v.is_inference() else _version(v)  # an inference tensor keeps no counter
            if known is not None and _alive(known[0]) is v:
                token = known[1]
            else:  # never seen, or its id's earlier tensor is dead: a new tensor
                self.next_token = token = self.next_token + 1
                self.tokens[i] = (weakref.ref(v), token)
            param = self.param_names.get(i)
            # a plain torch.Tensor is no Parameter (torch marks only subclass instances _is_param)
            s = Seen(token, v.shape, strides, v.dtype, version, param,
                     param is not None or (type(v) is not self.tensor_type and self._is_parameter(v)))
            seen[i] = s
            lives.append(v)
            return s
        if isinstance(v, (list, tuple)):
            return tuple([self._snap(x, seen, lives) if isinstance(x, (self.tensor_type, list, tuple)) else x
                          for x in v])
        return v

    def _is_parameter(self, v: Any) -> bool:
        """isinstance(v, torch.nn.Parameter) as its metaclass answers it (a tensor marked _is_param, or
        of the class), without the metaclass's Python-level check."""
        kind = type(v)
        if kind is not self.tensor_type and issubclass(kind, self.parameter_type):
            return True
        return bool(getattr(v, "__dict__", {}).get("_is_param", False))

    def _values(self, sch: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], seen: dict[int, Seen]) -> bool:
        """The facts only a tensor's values tell (the module's text says which); returns whether a
        scaled_dot_product_attention call runs fused."""
        tensor_type = self.tensor_type
        bound: dict[str, Any] = {}
        for i, arg in enumerate(sch.args):
            if i < len(args):
                bound[arg.name] = args[i]
            elif arg.name in kwargs:
                bound[arg.name] = kwargs[arg.name]
        if sch.mask_at is not None:
            mask = bound.get(sch.args[sch.mask_at].name)
            if isinstance(mask, tensor_type):
                seen[id(mask)].keeps = mask_keeps(mask)
        if sch.offsets_at is not None:
            offsets = bound.get(sch.args[sch.offsets_at].name)
            if isinstance(offsets, tensor_type):
                seen[id(offsets)].values = tuple(int(v) for v in offsets.tolist())
        if sch.key == "add":  # eager attention's mask may be one of these (the recorder decides)
            for v in bound.values():
                if isinstance(v, tensor_type) and v.is_floating_point():
                    seen[id(v)].keeps = mask_keeps(v)
        return bool(sch.sdpa and _sdp_runs_fused(bound))


def _alive(ref: Any) -> Any:
    """The tensor a weak reference holds, or None; as torch.utils.weak.WeakIdRef reads one (a tensor
    whose Python object was kept for C++ is fixed back, or autograd would see one reference too many
    and copy a gradient it would have taken as is)."""
    t = ref()
    if t is not None:
        t._fix_weakref()
    return t


def _count(value: Any) -> int:
    """The tensors (Seen) in a call's result."""
    if isinstance(value, Seen):
        return 1
    if isinstance(value, tuple):
        return sum(_count(v) for v in value)
    return 0


__all__ = ["Capture", "Seen", "mask_keeps"]
