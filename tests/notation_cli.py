"""Every operation of einx's notation as the command line takes it (``rearrange explain
PATTERN --op OP --shape ...``): one list for the tests of its table
(test_notation_explain.py) and of its pictures (test_notation_pictures.py)."""

from __future__ import annotations

# (op, pattern, input shapes, extra arguments: "name=length" axis lengths or options)
EVERY_OP = [
    ("rearrange", "a b, a c -> a (b + c)", ["4,6", "4,5"], []),
    ("rearrange", "a a -> a", ["5,5"], []),
    ("rearrange", "a (b + c) -> a b, a c", ["2,7"], ["b=3"]),
    ("add", "a b c, c", ["2,3,4", "4"], []),
    ("where", "a b, a b, -> a b", ["2,3", "2,3", ""], []),
    ("softmax", "a [b] c", ["2,3,4"], []),
    ("flip", "a [b]", ["2,3"], []),
    ("roll", "a [b]", ["2,3"], ["--shift", "1"]),
    ("argmax", "a [b] c -> a c", ["2,3,4"], []),
    ("reduce", "a [b] c", ["2,3,4"], ["--reduction", "sum"]),
    ("get_at", "[v] d, b t -> b t d", ["50,8", "2,5"], []),
    ("set_at", "[v] d, b t, b t d", ["50,8", "2,5", "2,5,8"], []),
    ("add_at", "[v] d, b t, b t d", ["50,8", "2,5", "2,5,8"], []),
    ("subtract_at", "b [v] d, b t, b t d", ["2,9,4", "2,5", "2,5,4"], []),
]
IDS = [f"{op}:{pattern}" for op, pattern, _, _ in EVERY_OP]


def explain_argv(op: str, pattern: str, shapes: list[str], extra: list[str],
                 *after: str) -> list[str]:
    """The command's arguments: axis lengths after the pattern, then the op, the options,
    ``after`` and a ``--shape`` per input."""
    lengths = [e for e in extra if "=" in e]
    options = [e for e in extra if "=" not in e]
    argv = ["explain", pattern, *lengths, "--op", op, *options, *after]
    for shape in shapes:
        argv += ["--shape", shape]
    return argv
