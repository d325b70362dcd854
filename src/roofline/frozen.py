"""`@frozen`: a class made as `@dataclass(frozen=True)` makes it, at about a quarter of the start-up cost.

Python 3.11's dataclasses compile six functions from source for each frozen class as it is defined
(`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`) and search each string
annotation for ClassVar, InitVar and KW_ONLY: about 4.4 M instructions a class of five fields, which
over the ~60 classes one `roofline model` run defines was ~40% of its in-process work (valgrind
callgrind, bench/results/bench_startup.txt). Here the fields are recorded as dataclasses records them
(`__dataclass_fields__`, so that `fields()`, `replace()`, `asdict()` and `is_dataclass()` work as on
any dataclass; `_register`); `__init__` is the one function compiled (the same parameters, defaults,
factories and `__post_init__` call as dataclasses'), only when first looked up (`_LazyInit`: the first
instance, or a reader such as `inspect.signature`), and for a class whose fields are all parameters
without a factory not compiled but copied from a template of as many fields (`_template`); the other
five are closures over the field names, compiled once with this module, with dataclasses' results
(`__eq__` compares the tuples of the compared fields of two objects of one class, `__hash__` hashes that
tuple, `__repr__` is `Name(field=value, ...)` guarded against recursion, assigning or deleting a field
raises `FrozenInstanceError`). A method the class defines itself is kept, as dataclasses keeps it;
`__dataclass_params__` says frozen. About 0.3 M instructions a class at definition, and ~0.3 M more
when its `__init__` is first used and compiled (a copied one: a few thousand; tests/test_frozen.py
holds it all to dataclasses' behaviour).

A class deriving from such a class (or from a frozen dataclass) has its base's fields first, as
dataclasses orders them. A class beyond that (a base dataclass that is not frozen or records ClassVars,
slots, a field named as a descriptor, InitVar or keyword-only fields, its own `__setattr__` or
`__delattr__`) goes to `dataclass(frozen=True)` unchanged, and a ClassVar annotation has dataclasses
record the fields.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, FrozenInstanceError
from operator import attrgetter
from threading import get_ident
from types import CodeType, FunctionType, MappingProxyType
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


def read_only(mapping: Mapping[K, V]) -> Mapping[K, V]:
    """`mapping` as a frozen value's field holds it: a MappingProxyType kept as it is (read-only
    already: another frozen value's field, or one made for this value alone), anything else copied
    into a new one, so that later changes to the caller's dict do not reach the value."""
    if mapping.__class__ is MappingProxyType:
        return mapping
    return MappingProxyType(dict(mapping))


class _Factory:
    """The default a field with a factory shows in `__init__`'s signature, as dataclasses' `<factory>`."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, Field))
def frozen(cls: type[T]) -> type[T]:
    """`cls` as `@dataclass(frozen=True)` makes it (the module's docstring says how and why)."""
    own = cls.__dict__
    if (own.get("__setattr__") or own.get("__delattr__") or _beyond(own)
            or any(b.__dict__.get("__slots__") or not _frozen_base(b) for b in cls.__mro__[:-1])
            or any(hasattr(type(getattr(cls, n, None)), "__set__") for n in own.get("__annotations__", ()))):
        return dataclasses.dataclass(frozen=True)(cls)
    doc = own.get("__doc__")
    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    defined = {n for n in ("__init__", "__repr__", "__eq__") if n in own}
    if doc is None:
        cls.__doc__ = "-"  # the signature dataclasses would write is the finished class's, below
    made, fields = _register(cls)
    names = tuple(f.name for f in fields)
    if "__init__" not in defined:
        made.__init__ = _LazyInit(made, fields)  # type: ignore[assignment, method-assign]
    if "__repr__" not in defined:
        _set(made, "__repr__", _repr([f.name for f in fields if f.repr]))
    if "__eq__" not in defined:
        _set(made, "__eq__", _eq(_key(tuple(f.name for f in fields if f.compare))))
    if not explicit_hash:
        _set(made, "__hash__", _hash(_key(tuple(f.name for f in fields
                                                  if (f.compare if f.hash is None else f.hash)))))
    _set(made, "__setattr__", _setattr(made, names))
    _set(made, "__delattr__", _delattr(made, names))
    made.__dataclass_params__ = _PARAMS  # type: ignore[attr-defined]
    if doc is None:
        import inspect

        made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
    return made


# what dataclass(frozen=True) records of its options, set on a template's (nothing compiled) and shared (nothing
# writes to it); dataclasses' marker of a real field, which its fields() selects by (internal: without it,
# dataclasses records the fields)
_PARAMS = dataclasses.dataclass(init=False, repr=False, eq=False)(type("_P", (), {"__doc__": "-"})).__dataclass_params__  # type: ignore[attr-defined]
_PARAMS.init = _PARAMS.repr = _PARAMS.eq = _PARAMS.frozen = True
_FIELD = getattr(dataclasses, "_FIELD", None)


def _register(cls: type[T]) -> tuple[type[T], tuple[Field[Any], ...]]:
    """`cls` recorded as a dataclass (`__dataclass_fields__`, `__match_args__`, a field's default left as
    its class attribute, a factory's removed), and its fields. As dataclasses records it, without its
    per-annotation search for ClassVar, InitVar and KW_ONLY (a class naming one is recorded by dataclasses,
    as is every class where its internal marker of a field is missing)."""
    own = cls.__dict__
    annotations: dict[str, Any] = own.get("__annotations__", {})
    if _FIELD is None or any(not isinstance(t, str) or "ClassVar" in t for t in annotations.values()):
        made = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
        return made, dataclasses.fields(made)  # type: ignore[arg-type]
    fields: dict[str, Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:  # a frozen base's fields first, in its order, as dataclasses collects them
        fields.update(base.__dict__.get("__dataclass_fields__", {}))
    for name, kind in annotations.items():
        value = own.get(name, MISSING)
        f = value if isinstance(value, Field) else dataclasses.field(default=value)
        f.name, f.type, f._field_type = name, kind, _FIELD  # type: ignore[union-attr]
        if f.kw_only is MISSING:
            f.kw_only = False
        if f.default is not MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        if isinstance(value, Field):
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        fields[name] = f
    for name, value in own.items():
        if isinstance(value, Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_fields__ = fields  # type: ignore[attr-defined]
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(n for n, f in fields.items() if f.init)  # type: ignore[attr-defined, misc]
    abc.update_abstractmethods(cls)
    return cls, tuple(fields.values())


def _frozen_base(b: type) -> bool:
    """`b` is no dataclass, or a frozen one of real fields only (no ClassVar or InitVar entries): a class
    deriving from it can be made here, its fields after the base's."""
    own: dict[str, Field[Any]] | None = b.__dict__.get("__dataclass_fields__")
    params = b.__dict__.get("__dataclass_params__")
    return own is None or (params is not None and params.frozen and _FIELD is not None
                           and all(getattr(f, "_field_type", None) is _FIELD for f in own.values()))


def _beyond(own: Any) -> bool:
    """An InitVar or KW_ONLY annotation, or a keyword-only field: left to dataclasses (none in roofline)."""
    for t in own.get("__annotations__", {}).values():
        if (isinstance(t, str) and ("InitVar" in t or "KW_ONLY" in t)) or isinstance(t, dataclasses.InitVar) \
                or t is dataclasses.KW_ONLY:
            return True
    return any(isinstance(v, Field) and v.kw_only is True for v in own.values())


def _set(cls: type, name: str, fn: Callable[..., Any]) -> None:
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, fn)


class _LazyInit:
    """A class's `__init__` until it is first looked up: then compiled (`_init`), put on the class in its
    place and returned. The lookup is the first instance made (the type's slot asks the class for
    `__init__`, as for any descriptor) or a reader such as `inspect.signature`; of the ~50 classes one
    `roofline model` run defines, a third never make an instance, and the compile is most of the
    decorator's cost (~0.6 of ~0.9 M instructions a class)."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type, fields: tuple[Field[Any], ...]) -> None:
        self.cls, self.fields = cls, fields

    def __get__(self, obj: object, owner: type | None = None) -> Callable[..., None]:
        fn = _init(self.cls, self.fields)
        _set(self.cls, "__init__", fn)  # on the decorated class, also when `obj` is of a subclass
        return fn if obj is None else fn.__get__(obj, owner)


def _init(cls: type, fields: tuple[Field[Any], ...]) -> Callable[..., None]:
    """`__init__` as dataclasses writes it for a frozen class (the same parameters and defaults, a factory
    called where its argument is left out, then `__post_init__` if the class has one), the fields set in
    one `self.__dict__.update(...)` where dataclasses writes an `object.__setattr__` a field: the same for
    a class without slots or descriptors of those names (`frozen` sends any other to dataclasses), and
    half the text to compile for five fields."""
    me = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    env: dict[str, Any] = {"_HAS_DEFAULT_FACTORY": _HAS_FACTORY}
    params, values = [me], []
    seen_default = False
    for f in fields:
        if f.default_factory is not MISSING:
            env[f"_dflt_{f.name}"] = f.default_factory
            value = (f"_dflt_{f.name}() if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}" if f.init
                     else f"_dflt_{f.name}()")
        elif f.init:
            value = f.name
            if f.default is not MISSING:
                env[f"_dflt_{f.name}"] = f.default
        else:
            continue  # a field outside __init__ without a factory reads its class attribute
        values.append(f"{f.name}={value}")
        if f.init:
            if f.default is MISSING and f.default_factory is MISSING:
                if seen_default:
                    raise TypeError(f"non-default argument {f.name!r} follows default argument")
                params.append(f.name)
            else:
                seen_default = True
                default = "_HAS_DEFAULT_FACTORY" if f.default is MISSING else f"_dflt_{f.name}"
                params.append(f"{f.name}={default}")
    post = hasattr(cls, "__post_init__")
    module = sys.modules.get(cls.__module__)
    scope_globals = module.__dict__ if module is not None else {}
    template = _template(len(fields), post) if fields and len(values) == len(fields) == len(params) - 1 \
        and all(f.default_factory is MISSING for f in fields) else None
    fn: Callable[..., None]
    if template is not None:  # every field a parameter, none with a factory: the template's code, renamed
        names = tuple(f.name for f in fields)
        code = template.replace(co_varnames=(me, *names), co_consts=tuple(
            names if c == _placeholders(len(fields)) else c for c in template.co_consts))
        fn = FunctionType(code, scope_globals, "__init__",
                          tuple(f.default for f in fields if f.default is not MISSING) or None)
    else:
        body = [f"{me}.__dict__.update({', '.join(values)})"] if values else []
        if post:
            body.append(f"{me}.__post_init__()")
        lines = "\n".join(f"  {line}" for line in body or ["pass"])
        text = (f"def __create_fn__({', '.join(env)}):\n def __init__({','.join(params)}):\n{lines}\n"
                " return __init__")
        scope: dict[str, Any] = {}
        exec(text, scope_globals, scope)
        fn = scope["__create_fn__"](**env)
    fn.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return fn


def _placeholders(n: int) -> tuple[str, ...]:
    return tuple(f"_{i}" for i in range(n))


@functools.cache
def _template(n: int, post: bool) -> CodeType | None:
    """The code of `def __init__(self, _0, ..., _n-1): self.__dict__.update(_0=_0, ...)` (then
    `self.__post_init__()` if `post`), compiled once for every class of n fields that are all parameters
    without a factory: `_init` gives a class a copy with its own parameter names (`CodeType.replace`: the
    local names and the keyword names' constant), ~1 µs where a compile of the class's own text takes ~30
    (valgrind: 0.55 M instructions a class). None where the compiled code is not of that form (another
    Python's compiler), and `_init` compiles each class's text instead."""
    names = _placeholders(n)
    body = f"  self.__dict__.update({', '.join(f'{a}={a}' for a in names)})\n"
    scope: dict[str, Any] = {}
    exec(f"def __init__(self, {', '.join(names)}):\n{body}{'  self.__post_init__()' if post else ''}\n", {}, scope)
    code: CodeType = scope["__init__"].__code__
    formed = code.co_varnames == ("self", *names) and code.co_consts.count(names) == 1
    return code if formed else None


def _key(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of an object's named attributes, (self.a, self.b, ...), as dataclasses compares it."""
    if not names:
        return lambda obj: ()
    get = attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (get(obj),)
    return get


def _eq(key: Callable[[object], tuple[Any, ...]]) -> Callable[[object, object], Any]:
    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _hash(key: Callable[[object], tuple[Any, ...]]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:
        return hash(key(self))
    return __hash__


def _repr(names: list[str]) -> Callable[[object], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: object) -> str:
        mark = (id(self), get_ident())
        if mark in running:
            return "..."
        running.add(mark)
        try:
            inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        finally:
            running.discard(mark)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _setattr(cls: type, names: tuple[str, ...]) -> Callable[[object, str, object], None]:
    def __setattr__(self: object, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]
    return __setattr__


def _delattr(cls: type, names: tuple[str, ...]) -> Callable[[object, str], None]:
    def __delattr__(self: object, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]
    return __delattr__
