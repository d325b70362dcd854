"""`roofline.frozen.frozen` against its reference, the standard library's `dataclass(frozen=True)`: the
same class on both sides must behave the same (construction, defaults and factories, `__post_init__`,
equality, hash, repr, frozen errors, `fields`/`replace`/`asdict`, the signature, methods a class
defines itself), while compiling three functions fewer a class (dataclasses compiles six)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from dataclasses import FrozenInstanceError, dataclass, field
from functools import cached_property
from typing import ClassVar

import pytest

from roofline.frozen import frozen


def make(deco):  # the same class bodies, made by `deco`
    class Plain:
        """A record."""

        a: int
        b: float
        c: str = "x"
        d: tuple[int, ...] = field(default_factory=tuple)
        e: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
        kind: ClassVar[str] = "plain"

        @cached_property
        def twice(self) -> float:
            return 2 * self.b

    class Post:
        a: int
        b: int = field(default=0, init=False)
        n: list[int] = field(default_factory=list, init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "b", self.a + 1)

    class Own:
        x: int

        def __repr__(self) -> str:
            return f"own {self.x}"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own) and abs(self.x - other.x) < 2

        def __hash__(self) -> int:
            return 7

    class One:
        x: float

    class Empty:
        pass

    class NoDoc:
        q: int
        r: str = "s"
    NoDoc.__doc__ = None

    class Defaults:
        """Every field a parameter, none with a factory, and a __post_init__."""

        p: int
        q: str = "q"
        r: tuple[int, ...] = ()

        def __post_init__(self) -> None:
            object.__setattr__(self, "r", (*self.r, self.p))

    made = {c.__name__: deco(c) for c in (Plain, Post, Own, One, Empty, NoDoc, Defaults)}

    class Child(made["Post"]):  # type: ignore[misc, valid-type]
        """A derived record: Post's fields, then its own."""

        z: str = "z"
        name = "child"  # a class attribute, not a field

    made["Child"] = deco(Child)
    return made


OURS, THEIRS = make(frozen), make(dataclass(frozen=True))
NAN = float("nan")  # one object: a NaN hashes by identity (Python 3.10+)


@pytest.mark.parametrize("name", sorted(OURS))
def test_the_class_is_a_frozen_dataclass_as_the_standard_librarys(name: str) -> None:
    ours, theirs = OURS[name], THEIRS[name]
    assert dataclasses.is_dataclass(ours)
    assert [(f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(ours)] == \
        [(f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(theirs)]
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert ours.__init__.__annotations__ == theirs.__init__.__annotations__
    assert ours.__doc__ == theirs.__doc__
    assert ours.__match_args__ == theirs.__match_args__
    p, q = ours.__dataclass_params__, theirs.__dataclass_params__
    assert (p.init, p.repr, p.eq, p.order, p.unsafe_hash, p.frozen) == \
        (q.init, q.repr, q.eq, q.order, q.unsafe_hash, q.frozen)
    for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        assert getattr(ours, method).__qualname__ == getattr(theirs, method).__qualname__


def pairs(cls: dict[str, type]) -> list[object]:
    P = cls["Plain"]
    return [P(1, 2.0), P(1, 2.0, "y", (3,), {"k": 1}), P(a=1, b=NAN), cls["Post"](4), cls["Own"](3),
            cls["One"](0.5), cls["Empty"](), cls["NoDoc"](1), cls["Child"](4), cls["Child"](4, "w"),
            cls["Defaults"](1), cls["Defaults"](2, "x", (3,)), cls["Defaults"](p=2, r=(3,), q="x")]


def hashed(obj: object) -> object:
    try:
        return hash(obj)
    except TypeError as e:
        return str(e)


def test_instances_behave_alike() -> None:
    ours, theirs = pairs(OURS), pairs(THEIRS)
    for o, t in zip(ours, theirs, strict=True):
        assert repr(o) == repr(t)
        assert hashed(o) == hashed(t)  # Post holds a list: both raise TypeError
        assert dataclasses.asdict(o) == dataclasses.asdict(t)
        assert (o == copy.copy(o)) is (t == copy.copy(t))
        assert (o == copy.deepcopy(o)) is (t == copy.deepcopy(t))
        assert o.__eq__(1) is t.__eq__(1)  # NotImplemented, or Own's own False
    # equality over compared fields only, as dataclasses: `e` has compare=False
    P, Q = OURS["Plain"], THEIRS["Plain"]
    assert (P(1, 2.0, e={"a": 1}) == P(1, 2.0, e={"b": 2})) is (Q(1, 2.0, e={"a": 1}) == Q(1, 2.0, e={"b": 2})) is True
    assert (P(1, 2.0) == P(1, 3.0)) is (Q(1, 2.0) == Q(1, 3.0)) is False
    # tuples compare their items by identity first: one NaN object equals itself in a field, two do not
    nan = float("nan")
    assert (P(1, nan) == P(1, nan)) is (Q(1, nan) == Q(1, nan)) is True
    assert (P(1, nan) == P(1, float("nan"))) is (Q(1, nan) == Q(1, float("nan"))) is False
    assert P(1, 2.0).twice == 4.0 and P.kind == "plain"
    assert OURS["Post"](4).b == THEIRS["Post"](4).b == 5
    assert OURS["Post"](4).n == [] and OURS["Post"](4).n is not OURS["Post"](4).n  # a fresh list each time


def test_replace_and_frozen_errors() -> None:
    for cls in (OURS, THEIRS):
        p = cls["Plain"](1, 2.0, d=(1,))
        r = dataclasses.replace(p, c="z")
        assert (r.a, r.b, r.c, r.d) == (1, 2.0, "z", (1,))
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'a'"):
            p.a = 3  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'zz'"):
            p.zz = 3  # type: ignore[attr-defined]
        with pytest.raises(FrozenInstanceError, match="cannot delete field 'b'"):
            del p.b  # type: ignore[misc]
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
            cls["Plain"](1)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="unexpected keyword argument 'b'"):
            cls["Post"](1, b=2)  # type: ignore[call-arg]


def test_a_subclass_is_made_here_and_a_mutable_base_or_a_keyword_only_field_go_to_dataclasses() -> None:
    base = OURS["One"]

    @frozen
    class Two(base):  # type: ignore[valid-type, misc]
        """One and y (a docstring: without one, the signature read for it compiles __init__ now)."""

        y: int = 0

    assert type(Two.__dict__["__init__"]).__name__ == "_LazyInit"  # made here, not by dataclasses
    assert dataclasses.fields(Two)[1].name == "y" and Two(1.0, 2) == Two(1.0, 2) and hash(Two(1.0)) == hash((1.0, 0))

    @dataclass
    class Mutable:
        x: int

    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
        @frozen
        class Three(Mutable):
            y: int = 0

    @frozen
    class Kw:
        a: int
        b: int = field(default=1, kw_only=True)

    assert str(inspect.signature(Kw)) == "(a: 'int', *, b: 'int' = 1) -> None"


def test_three_compiles_fewer_than_dataclasses() -> None:
    # dataclasses (3.11) compiles __init__, __repr__, __eq__, __hash__, __setattr__, __delattr__ from
    # text, one exec each (dataclasses._create_fn); @frozen compiles only __init__, and a class whose fields
    # are all parameters without a factory copies a template compiled once for its number of fields
    import builtins

    from roofline.frozen import _template

    _template.cache_clear()

    calls: list[str] = []
    real = builtins.exec

    def counting(*args: object, **kw: object) -> object:
        calls.append("exec")
        return real(*args, **kw)  # type: ignore[arg-type]

    builtins.exec = counting  # type: ignore[assignment]
    try:
        made = make(frozen)
        defined = len(calls)
        for cls in made.values():
            cls.__init__  # noqa: B018 (the lookup compiles it)
        ours = len(calls)
        calls.clear()
        make(dataclass(frozen=True))
        theirs = len(calls)
    finally:
        builtins.exec = real
    # eight classes: Own defines __repr__, __eq__ and __hash__ itself, Empty has no field; Child, derived
    # from Post, is made here too, not sent to dataclasses (six compiles)
    assert theirs >= 8 * 3 + 3
    # an __init__ is made when first looked up: at definition only for the five classes without a
    # docstring, whose signature, read through __init__, becomes their docstring: Post and Empty compile
    # their own (fields outside __init__; no field), Own and One copy the one-field template, NoDoc the
    # two-field one (4 compiles); then Plain and Child compile theirs (factories; Post's fields) and
    # Defaults copies the three-field template with __post_init__ (3 more)
    assert (defined, ours) == (4, 7)


def test_init_is_compiled_on_first_use_and_then_the_classs_own() -> None:
    # the first instance (or lookup) puts the compiled function on the decorated class in place of the
    # lazy one, also when the first instance is of an undecorated subclass
    @frozen
    class Base:
        """A base."""

        a: int
        b: str = "b"

    class Sub(Base):
        pass

    assert type(Base.__dict__["__init__"]).__name__ == "_LazyInit"
    s = Sub(1)
    assert (s.a, s.b, type(s)) == (1, "b", Sub)
    assert inspect.isfunction(Base.__dict__["__init__"])
    assert "__init__" not in Sub.__dict__
    assert Base(2, "c") == Base(a=2, b="c")
    with pytest.raises(TypeError):
        Base()  # type: ignore[call-arg]


def test_a_field_named_as_a_base_classs_property_is_left_to_dataclasses() -> None:
    # dataclasses sets each field through object.__setattr__, which a read-only property refuses; @frozen's
    # one __dict__.update would shadow it silently, so such a class goes to dataclasses
    class Base:
        @property
        def x(self) -> int:
            return 1

    for deco in (frozen, dataclass(frozen=True)):
        made = deco(type("D", (Base,), {"__annotations__": {"x": "int"}}))
        with pytest.raises(AttributeError):
            made(2)
