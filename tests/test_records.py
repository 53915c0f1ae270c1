"""``@record`` against ``@dataclass(frozen=True, slots=True)``: the same declarations, side
by side, must behave alike (rearrange/records.py states the one visible difference)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
from dataclasses import FrozenInstanceError, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rearrange.records import record

STANDARD = dataclasses.dataclass(frozen=True, slots=True)


def declarations(decorate):
    """The shapes of declaration the package uses, each declared with ``decorate``. The
    classes are made anew on every call, so the two decorators never share one."""

    class Base:                       # a plain base, as Plan has JsonDump
        def describe(self) -> str:
            return f"<{type(self).__name__}>"

    @decorate
    class Plain:
        """Three required fields."""
        a: int
        b: str
        c: tuple

    @decorate
    class Defaults(Base):
        """Defaults, a field left out of comparison and repr, one not in __init__."""
        a: int
        b: object = None
        c: tuple = ()
        hidden: tuple = field(default=(), repr=False, compare=False)
        scanned: object = field(default=None, init=False, compare=False, repr=False)
        made: list = field(default_factory=list)

    @decorate
    class Checked:
        """A __post_init__ that checks and derives (through object.__setattr__)."""
        shape: tuple
        size: int = 0

        def __post_init__(self) -> None:
            if any(n < 0 for n in self.shape):
                raise ValueError(f"negative length in {self.shape}")
            object.__setattr__(self, "size", math.prod(self.shape))

    @decorate
    class One:
        """One field: equality and hash still over a tuple."""
        value: float

    @decorate
    class Empty:
        """No fields at all."""

    @decorate
    class Undocumented:
        x: int
        y: int = 2

    @decorate
    class Hashed:
        """A field in the hash though not compared, one compared but not hashed."""
        a: int
        b: int = field(default=0, compare=False, hash=True)
        c: int = field(default=0, hash=False)

    @decorate
    class OwnMethods:
        """Methods of its own are kept (dataclass does not overwrite them)."""
        a: int

        def __repr__(self) -> str:
            return f"own {self.a}"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnMethods) and abs(self.a) == abs(other.a)

    return {"Plain": (Plain, (1, "s", (2, 3)), {}),
            "Defaults": (Defaults, (1,), {"c": (4,), "hidden": (9,)}),
            "Checked": (Checked, ((2, 3),), {}),
            "One": (One, (float("nan"),), {}),
            "Empty": (Empty, (), {}),
            "Undocumented": (Undocumented, (5,), {}),
            "Hashed": (Hashed, (1, 2, 3), {}),
            "OwnMethods": (OwnMethods, (-3,), {})}


NAMES = list(declarations(record))


def both(name):
    (ours, args, kwargs), (theirs, _, _) = declarations(record)[name], declarations(STANDARD)[name]
    return ours, theirs, args, kwargs


def outcome(call):
    """What a call returns, or the type and message of what it raises."""
    try:
        return ("value", call())
    except Exception as error:     # noqa: BLE001 - the outcome is compared, whatever it is
        return ("raised", type(error), str(error))


@pytest.mark.parametrize("name", NAMES)
def test_declaration_matches_dataclass(name):
    ours, theirs, args, kwargs = both(name)
    assert dataclasses.is_dataclass(ours)
    assert [(f.name, f.default, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(ours)] \
        == [(f.name, f.default, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(theirs)]
    assert ours.__slots__ == theirs.__slots__
    assert ours.__match_args__ == theirs.__match_args__
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert ours.__doc__ == theirs.__doc__
    assert ours.__init__.__qualname__ == f"{ours.__qualname__}.__init__"
    assert (ours.__hash__ is None) == (theirs.__hash__ is None)


@pytest.mark.parametrize("name", NAMES)
def test_instances_behave_alike(name):
    ours, theirs, args, kwargs = both(name)
    a, b = ours(*args, **kwargs), theirs(*args, **kwargs)
    assert repr(a) == repr(b)
    assert hasattr(a, "__dict__") == hasattr(b, "__dict__") == (name == "Defaults")
    assert outcome(lambda: hash(a) == hash(ours(*args, **kwargs))) \
        == outcome(lambda: hash(b) == hash(theirs(*args, **kwargs)))
    assert (a == ours(*args, **kwargs)) == (b == theirs(*args, **kwargs))
    assert (a == b) is False and (a != b) is True          # never equal across classes
    for attribute in [f.name for f in dataclasses.fields(a)]:
        assert outcome(lambda: setattr(a, attribute, 1))[:2] \
            == outcome(lambda: setattr(b, attribute, 1))[:2] == ("raised", FrozenInstanceError)
        assert outcome(lambda: delattr(a, attribute))[:2] \
            == outcome(lambda: delattr(b, attribute))[:2] == ("raised", FrozenInstanceError)
    # A name that is not a field: FrozenInstanceError too, as documented (3.11's slotted
    # dataclass raises a TypeError from super() here: its __setattr__ holds the class
    # that _add_slots replaced).
    assert outcome(lambda: setattr(a, "new", 1))[:2] == ("raised", FrozenInstanceError)
    assert dataclasses.asdict(a) == dataclasses.asdict(b) or name == "One"   # nan != nan


@pytest.mark.parametrize("name", NAMES)
def test_pickle_copy_and_replace(name):
    ours, args, kwargs = declarations(record)[name]
    # pickle finds a class by module and qualified name: this one as a module global
    ours.__qualname__ = f"_pickled_{name}"
    globals()[ours.__qualname__] = ours
    a = ours(*args, **kwargs)
    for clone in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a)):
        assert repr(clone) == repr(a)
        assert [repr(getattr(clone, n, "unset")) for n in ours.__slots__] \
            == [repr(getattr(a, n, "unset")) for n in ours.__slots__]
    changed = {f.name: getattr(a, f.name) for f in dataclasses.fields(a) if f.init}
    assert repr(dataclasses.replace(a, **changed)) == repr(a)


def test_post_init_and_errors_alike():
    ours, theirs, _, _ = both("Checked")
    assert ours((2, 3)).size == theirs((2, 3)).size == 6
    assert outcome(lambda: ours((-1,))) == outcome(lambda: theirs((-1,)))
    for call in (lambda c: c(), lambda c: c((1,), 2, 3), lambda c: c((1,), nope=1)):
        assert outcome(lambda: call(ours))[:2] == outcome(lambda: call(theirs))[:2]
    defaults, standard, _, _ = both("Defaults")
    assert outcome(lambda: dataclasses.replace(defaults(1), scanned=2))[:2] \
        == outcome(lambda: dataclasses.replace(standard(1), scanned=2))[:2]
    made = defaults(1)
    assert made.made == [] and made.made is not defaults(1).made   # a factory per instance


def test_non_default_after_default_is_refused():
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class Wrong:
            a: int = 0
            b: int


def test_own_setattr_is_refused_like_dataclass():
    with pytest.raises(TypeError, match="cannot overwrite attribute __setattr__"):
        @record
        class Wrong:
            a: int

            def __setattr__(self, name, value):
                pass


def test_record_subclasses_record():
    @record
    class Parent:
        a: int

    @record
    class Child(Parent):
        b: int = 1

    child = Child(3)
    assert (child.a, child.b) == (3, 1) and child != Parent(3) and child == Child(3, 1)
    with pytest.raises(FrozenInstanceError):
        child.a = 4


@given(st.tuples(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=3)
                 .map(tuple)),
       st.tuples(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=3)
                 .map(tuple)))
def test_equality_and_hash_over_values(first, second):
    ours, theirs, _, _ = both("Plain")
    assert (ours(*first) == ours(*second)) == (theirs(*first) == theirs(*second))
    assert (hash(ours(*first)) == hash(ours(*second))) \
        == (hash(theirs(*first)) == hash(theirs(*second)))
    assert {ours(*first), ours(*second)} == {ours(*first), ours(*second), ours(*first)}


def test_every_dataclass_of_the_package_is_a_record():
    """A class declared with plain ``@dataclass`` would bring back the import cost (and the
    3.11 slotted-frozen TypeError above): every dataclass the package defines is a record."""
    import importlib
    import pkgutil

    import rearrange

    found = []
    for module_info in pkgutil.walk_packages(rearrange.__path__, "rearrange."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)   # torch and dask are installed
        for value in vars(module).values():
            if (isinstance(value, type) and value.__module__ == module.__name__
                    and dataclasses.is_dataclass(value)):
                setter = getattr(value.__setattr__, "__code__", None)
                found.append((value.__qualname__, setter and setter.co_name))
    assert len(found) > 50
    assert [name for name, setter in found if setter != "_record__setattr__"] == []
