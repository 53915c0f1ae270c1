"""``@record``: the package's frozen dataclass, declared at a quarter of the import cost.

Every plan, layout, pattern and kernel description in rearrange is a frozen, slotted
dataclass. On Python 3.11, ``@dataclass(frozen=True, slots=True)`` compiles six methods
per class from generated source (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``): about 1 ms a class, and ``import rearrange`` declares
twenty of them — half of what the import costs on top of numpy's (issue #37).

``record`` declares the same class for a quarter of that:

* ``dataclass(init=False, repr=False, eq=False, slots=True)`` — no generated source — makes
  it a real dataclass: its fields (with their ``default``, ``init``, ``repr``, ``compare``
  and ``hash`` flags), ``__slots__``, ``__match_args__``; so ``dataclasses.fields``,
  ``replace``, ``asdict`` and ``is_dataclass`` work as on any dataclass.
* ``__init__`` is the one method compiled from source, since it is what a cold call
  runs most (the same source ``dataclass`` writes: defaults, ``init=False`` fields,
  ``default_factory``, ``__post_init__``).
* ``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__``, ``__delattr__``, ``__getstate__``
  and ``__setstate__`` are shared functions over the class's field names (an
  ``operator.attrgetter`` for the compared fields).

Invariant: an instance behaves as the same declaration under
``@dataclass(frozen=True, slots=True)`` would — equality (tuples of the compared fields,
only between instances of the same class), hash, repr, ``FrozenInstanceError`` on
assignment and deletion, pickling and copying, the signature and the generated
docstring; tests/test_records.py holds the two side by side. One difference is
visible: ``__dataclass_params__.frozen`` is False (the dataclass machinery did not make
the class frozen, ``record`` did), so a ``@dataclass(frozen=True)`` may not subclass a
record; records subclass records.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, FrozenInstanceError
from operator import attrgetter
from typing import Any, Callable, TypeVar

__all__ = ["record", "lazy_slots", "slot_setter"]


class _Factory:
    """The default of a field made by its ``default_factory`` (shown as dataclass shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()

T = TypeVar("T", bound=type)


def record(cls: T) -> T:
    """Declare ``cls`` as a frozen, slotted dataclass (see the module's docstring)."""
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
    undocumented = cls.__doc__ is None
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=True)
    fields = dataclasses.fields(cls)
    own = cls.__dict__
    names = tuple(field.name for field in fields)

    methods: dict[str, Callable[..., Any]] = {}
    if "__init__" not in own:
        methods["__init__"] = _init_function(cls, fields)
    if "__repr__" not in own:
        methods["__repr__"] = _repr_function(tuple(field.name for field in fields
                                                   if field.repr))
    if "__eq__" not in own:
        methods["__eq__"] = _eq_function(
            _tuple_getter(tuple(field.name for field in fields if field.compare)))
    if own.get("__hash__") is None:   # None: the class defines no __hash__ of its own
        hashed = tuple(field.name for field in fields
                       if (field.compare if field.hash is None else field.hash))
        methods["__hash__"] = _hash_function(_tuple_getter(hashed))
    methods["__setattr__"], methods["__delattr__"] = _frozen_functions(cls, names)
    if "__getstate__" not in own:
        methods["__getstate__"] = _getstate_function(names)
    if "__setstate__" not in own:
        methods["__setstate__"] = _setstate_function(names)
    for name, method in methods.items():
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)
    if undocumented:   # dataclass's docstring, written before there was an __init__
        import inspect
        cls.__doc__ = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    return cls


def lazy_slots(cls: T, build: Callable[[Any, str], Any], *names: str) -> T:
    """Let the slots ``names`` of the record ``cls`` be left unset by whoever makes an
    instance: the first read of an unset one sets it to ``build(instance, name)`` (which
    may set other slots too) and returns it. A set slot reads as any other.

    This is what a ``__getattr__`` fallback would do, without its cost: a class that
    defines ``__getattr__`` reads *every* attribute through CPython's slower hook (three
    times a plain slot's read on 3.11, and never specialised), while these descriptors
    cost only the lazy slots' reads, and those only run Python code while unset."""
    for name in names:
        member = cls.__dict__[name]
        setattr(cls, name, _LazySlot(member, build, name))
    return cls


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """``set(instance, value)`` for the slot ``name`` of the record ``cls``: its member
    descriptor's ``__set__`` (under a lazy slot's descriptor too), which skips the frozen
    ``__setattr__``. For code that makes instances whose values are canonical by
    construction (the planner's steps and plans, the scanner's patterns)."""
    descriptor = cls.__dict__[name]
    return (descriptor.member if isinstance(descriptor, _LazySlot) else descriptor).__set__


class _LazySlot:
    """A data descriptor over a slot's member descriptor (see :func:`lazy_slots`)."""

    __slots__ = ("member", "build", "name")

    def __init__(self, member: Any, build: Callable[[Any, str], Any], name: str) -> None:
        self.member, self.build, self.name = member, build, name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self.member
        try:
            return self.member.__get__(instance, owner)
        except AttributeError:
            value = self.build(instance, self.name)
            self.member.__set__(instance, value)
            return value

    def __set__(self, instance: Any, value: Any) -> None:
        self.member.__set__(instance, value)

    def __delete__(self, instance: Any) -> None:
        self.member.__delete__(instance)


def _init_function(cls: type, fields: tuple[dataclasses.Field, ...]) -> Callable[..., None]:
    """``__init__`` compiled from source, as ``dataclass`` writes it for a frozen class:
    every field set through ``object.__setattr__``, defaults bound by name."""
    scope: dict[str, Any] = {"_set": object.__setattr__, "_FACTORY": _FACTORY}
    parameters: list[str] = []
    body: list[str] = []
    for k, field in enumerate(fields):
        default, factory = field.default, field.default_factory
        if field.init:
            if default is not MISSING:
                scope[f"_default_{k}"] = default
                parameters.append(f"{field.name}=_default_{k}")
            elif factory is not MISSING:
                scope[f"_factory_{k}"] = factory
                parameters.append(f"{field.name}=_FACTORY")
                body.append(f"    if {field.name} is _FACTORY: {field.name} = _factory_{k}()")
            else:
                if parameters and "=" in parameters[-1]:
                    raise TypeError(f"non-default argument {field.name!r} follows default "
                                    "argument")
                parameters.append(field.name)
            body.append(f"    _set(self, {field.name!r}, {field.name})")
        elif default is not MISSING:
            scope[f"_default_{k}"] = default
            body.append(f"    _set(self, {field.name!r}, _default_{k})")
        elif factory is not MISSING:
            scope[f"_factory_{k}"] = factory
            body.append(f"    _set(self, {field.name!r}, _factory_{k}())")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = (f"def __init__(self, {', '.join(parameters)}):\n"
              + ("\n".join(body) if body else "    pass") + "\n")
    namespace: dict[str, Any] = {}
    exec(source, scope, namespace)
    init = namespace["__init__"]
    init.__annotations__ = {field.name: field.type for field in fields if field.init}
    init.__annotations__["return"] = None
    return init


def _tuple_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields' values as a tuple (``attrgetter`` returns a bare value for one name)."""
    if len(names) >= 2:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda instance: ()


def _repr_function(names: tuple[str, ...]) -> Callable[[Any], str]:
    def _record__repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"
    return _record__repr__


def _eq_function(compared: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def _record__eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented
    return _record__eq__


def _hash_function(hashed: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def _record__hash__(self: Any) -> int:
        return hash(hashed(self))
    return _record__hash__


def _frozen_functions(cls: type, names: tuple[str, ...]
                      ) -> tuple[Callable[[Any, str, Any], None], Callable[[Any, str], None]]:
    """``__setattr__`` and ``__delattr__`` of a frozen class, as ``dataclass`` writes
    them: refused on the class's own instances and on its fields, passed on otherwise."""
    fields = frozenset(names)

    def _record__setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in fields:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def _record__delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fields:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)
    return _record__setattr__, _record__delattr__


def _getstate_function(names: tuple[str, ...]) -> Callable[[Any], list[Any]]:
    def _record__getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in names]
    return _record__getstate__


def _setstate_function(names: tuple[str, ...]) -> Callable[[Any, list[Any]], None]:
    def _record__setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(names, state):
            object.__setattr__(self, name, value)
    return _record__setstate__
