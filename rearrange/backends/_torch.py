"""PyTorch tensors: the plan lowered to torch's own ops.

Views are ``view``/``permute``/``expand`` (the planner's view test is torch's own
``computeStride``, so a planned view never copies and ``view`` never fails); reductions
are torch reductions; so autograd, devices and ``torch.compile`` see ordinary torch ops.
A copy step of a CPU tensor that autograd does not record uses the package's copy kernel
where the benchmark shows it faster than torch's (every variant except the small-copy
``numpy`` one), and ``tensor.contiguous()`` otherwise; explain says which.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import ArgumentTypeError, NoViewError
from ..layout import Layout
from ..plan import Plan
from ..recipe import is_symbolic
from . import ArrayInfo, reduction_error

if TYPE_CHECKING:
    from ..symbolic import SymbolicPlan

Runner = Callable[[Any], Any]


def _torch() -> Any:
    return sys.modules["torch"]


def matches(x: Any) -> bool:
    global _tracing_state
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return False
    _tracing_state = torch._C._get_tracing_state   # a torch tensor exists: torch is loaded
    return True


_OPERATIONS = ("rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "get_at", "set_at",
               "add_at", "subtract_at", "add", "subtract", "multiply", "divide", "maximum",
               "minimum", "logaddexp", "where", "softmax", "log_softmax", "flip", "roll",
               "sort", "argsort", "argmax", "argmin")
_registered: list[bool] = []


def allow_in_compiled_graph() -> None:
    """Register the operations with dynamo (``torch.compiler.allow_in_graph``): under
    ``torch.compile`` and ``torch.export`` each call becomes one node of the graph,
    traced through its torch ops (over symbolic sizes: :mod:`rearrange.symbolic`),
    instead of dynamo tracing the planner's Python. Needs ``torch._dynamo`` loaded:
    :func:`register_when_dynamo_loads` calls it at the right time."""
    if _registered:
        return
    _registered.append(True)
    import rearrange

    dynamo = sys.modules["torch._dynamo"]
    for name in _OPERATIONS:
        dynamo.allow_in_graph(getattr(rearrange, name))


def register_when_dynamo_loads() -> None:
    """Registration that does not depend on import order, and costs nothing until it is
    needed: at once if ``torch._dynamo`` (what torch.compile, torch.export and
    ``torch.compiler`` load) is loaded, else right after it loads. Importing
    ``torch._dynamo`` here would cost every torch user 1.6 s, compiling or not."""
    if "torch._dynamo" in sys.modules:
        allow_in_compiled_graph()
    elif not any(isinstance(finder, _AfterDynamoLoads) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterDynamoLoads())


class _AfterDynamoLoads:
    """An import hook that finds nothing itself: when ``torch._dynamo`` is imported, it
    asks the other finders for it and registers the operations once its module has
    run. It removes itself on first use; a failure to register warns, never breaks the
    import. (A meta path finder is anything with ``find_spec``: not deriving from
    ``importlib.abc.MetaPathFinder`` spares ``import rearrange`` importing that module.)"""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "torch._dynamo":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = None if find_spec is None else find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            try:
                allow_in_compiled_graph()
            except Exception as error:  # noqa: BLE001 - never break the caller's import
                warnings.warn(f"rearrange: could not register with torch.compile "
                              f"({type(error).__name__}: {error}); its calls will be traced "
                              f"by dynamo instead", RuntimeWarning, stacklevel=2)
        loader.exec_module = exec_then_register
        return spec


def cache_key(x: Any) -> tuple | list:
    if _tracing_state() is not None or x._has_symbolic_sizes_strides:
        # torch.jit.trace: sizes read from x.shape are recorded as reads of the shape only
        # when they flow into the ops themselves; a cached runner's would be constants.
        # Symbolic sizes (torch.compile, torch.export): unhashable already, and never to
        # be compared with a kept key's ints (a comparison would guard the trace on them)
        return [x]  # unhashable: no runner is kept (see ``traced``)
    try:
        # the layout too: a sparse tensor's stride() is all zeros, a broadcast's strides
        return x.shape, x.stride(), x.dtype, x.device, x.layout
    except RuntimeError:    # no sizes (nested tensors) or no strides (sparse CSR/CSC)
        raise not_dense(x) from None


def _tracing_state() -> Any:
    """torch.jit.trace's state, None when no trace runs (torch's own function, bound by
    ``matches``: the warm path's check costs one C call)."""
    return _torch()._C._get_tracing_state()


def traced(x: Any, axes_lengths: Mapping[str, Any]) -> bool:
    """Are ``x``'s sizes (or the axis lengths) traced, by torch.compile / torch.export
    (``SymInt`` s) or by torch.jit.trace? Then the call is planned over symbolic sizes
    (:mod:`rearrange.symbolic`): a plan of concrete sizes would pin the trace to them."""
    try:
        shape = x.shape
    except RuntimeError:    # nested tensors have no sizes
        check(x)
        raise
    return (not all(type(n) is int for n in shape) or any(map(is_symbolic, axes_lengths.values()))
            or _tracing_state() is not None)


def not_dense(x: Any) -> ArgumentTypeError | None:
    """The error for a tensor without a strided layout (sparse, mkldnn, nested), which no
    plan can describe: a plan is a layout over strided memory. None for a dense tensor."""
    torch = _torch()
    if x.layout is torch.strided and not x.is_nested:
        return None
    kind, fix = (("a nested tensor", ".to_padded_tensor(padding)") if x.is_nested
                 else (f"a tensor of layout {x.layout}", ".to_dense()"))
    return ArgumentTypeError(f"rearrange works on dense (strided) torch tensors; got {kind}: "
                             f"convert it with {fix} first")


def check(x: Any) -> None:
    """Raise :func:`not_dense`'s error for ``x``, if it has one."""
    error = not_dense(x)
    if error is not None:
        raise error


def describe(x: Any) -> ArrayInfo:
    check(x)
    shape = tuple(x.shape)
    strides = tuple(x.stride())
    dtype = str(x.dtype).removeprefix("torch.")
    return ArrayInfo(Layout(shape, strides, 0), dtype, x.element_size())


def stack(xs: list[Any]) -> Any:
    return _torch().stack(xs)


def to_numpy(x: Any) -> Any:
    """A numpy array of ``x``'s values: detached from autograd, on the CPU."""
    check(x)
    return x.detach().cpu().numpy()


# Numpy dtypes the kernel can view a CPU tensor's memory as (others: torch copies).
_NUMPY_VIEWABLE = frozenset({
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128", "uint16", "uint32", "uint64",
})


def describe_copy(plan: Plan, x: Any, info: ArrayInfo) -> Plan:
    """Name torch's copy where torch copies: off the CPU, for dtypes numpy cannot view,
    and for copies small enough that a kernel call costs more than it saves."""
    steps = list(plan.steps)
    for k, step in enumerate(steps):
        if not step.is_copy:
            continue
        kernel = step.kernel
        if x.device.type != "cpu" or info.dtype not in _NUMPY_VIEWABLE or kernel is None \
                or kernel.variant in ("numpy", "empty"):
            why = (f"{x.device.type} tensor" if x.device.type != "cpu"
                   else f"{info.dtype} has no numpy view" if info.dtype not in _NUMPY_VIEWABLE
                   else "small: torch's own copy costs less than a kernel call")
            replacement = _torch_copy_kernel(kernel, f"tensor.contiguous(): {why}")
        else:
            replacement = dataclasses.replace(
                kernel, fallback="torch's copy",
                reason=kernel.reason + "; torch's .contiguous() instead when autograd "
                "records the copy")
        steps[k] = dataclasses.replace(step, kernel=replacement)
    return dataclasses.replace(plan, steps=tuple(steps))


def _torch_copy_kernel(kernel: Any, reason: str) -> Any:
    from ..kernel import CopyKernel

    if kernel is None:
        return CopyKernel("torch", 0, (), (), None, 1, reason)
    return dataclasses.replace(kernel, variant="torch", reason=reason)


# ---------------------------------------------------------------------- lowering

def lower(plan: Plan, reduction: Any, sample: Any = None) -> Runner:
    """The plan as torch ops. Two realisations differ from the plan's steps, with
    identical results (values, dtype, shape, strides, view or not):

    * a reduction whose permute only moves the reduced axes last reduces the split input
      in place (the dims where those axes are), as einops does: torch reduces a strided
      view as fast as a permuted one, and the permute costs more than it saves;
    * a view of several ops is one ``as_strided`` where autograd, tracing and transforms
      do not watch (:func:`_strided_view`)."""
    stages: list[Runner] = []
    steps = plan.steps
    k = 0
    while k < len(steps):
        step = steps[k]
        following = steps[k + 1] if k + 1 < len(steps) else None
        if step.op in ("split", "unsqueeze", "merge"):
            stages.append(_view(step.args))
        elif step.op == "permute" and following is not None and following.op == "reduce" \
                and (in_place := _reduced_in_place(reduction, step.args, following.args)):
            stages.append(_reducer(reduction, in_place, plan.dtype))
            k += 1
        elif step.op == "permute":
            stages.append(_permute(step.args))
        elif step.op == "expand":
            stages.append(_expand(step.args))
        elif step.op == "reduce":
            stages.append(_reducer(reduction, step.args, plan.dtype))
        elif step.op == "copy" and step.kernel is not None and step.kernel.variant == "torch" \
                and following is not None and following.op == "merge":
            stages.append(_reshape(following.args))  # torch's reshape is that very copy
            k += 1
        elif step.op == "copy":
            stages.append(_copier(step.kernel, step is steps[-1] and plan.copy_requested))
        else:  # pragma: no cover - plan_transform makes no other steps
            raise AssertionError(f"unknown step {step.op}")
        k += 1
    if not stages:
        return lambda x: x.view_as(x)   # a new tensor object, like einops' identity views
    eager = _chain(stages)
    if len(stages) > 1 and plan.is_view:
        return _strided_view(eager, plan, sample) or eager
    return eager


def _chain(stages: list[Runner]) -> Runner:
    if len(stages) == 1:
        return stages[0]
    if len(stages) == 2:
        first, second = stages
        return lambda x: second(first(x))
    if len(stages) == 3:
        first, second, third = stages
        return lambda x: third(second(first(x)))

    def run(x: Any) -> Any:
        for stage in stages:
            x = stage(x)
        return x
    return run


def lower_symbolic(plan: SymbolicPlan, reduction: Any) -> Runner:
    """A plan over symbolic sizes as torch ops: first its checks (:func:`assert_sizes`),
    then ``reshape``, which lets torch decide view or copy at run time (``view`` with
    ``copy=False``, which refuses where a copy is needed); nothing here compares a size
    in Python."""
    torch = _torch()
    stages: list[Runner] = []
    checks = plan.checks
    for step in plan.steps:
        if step.op == "reshape":
            stages.append(_reshape(step.args) if plan.copy_requested is not False
                          else _strict_view(step.args, plan))
        elif step.op == "permute":
            stages.append(_permute(step.args))
        elif step.op == "reduce":
            stages.append(_reducer(reduction, step.args))
        elif step.op == "unsqueeze":
            stages.append(_unsqueeze(step.args))
        elif step.op == "expand":
            stages.append(_expand(step.args))
        else:  # copy=True
            stages.append(lambda x: x.clone(memory_format=torch.contiguous_format))

    def run(x: Any) -> Any:
        assert_sizes(checks)
        x = x.view_as(x) if not stages else x   # a new tensor object, like einops' views
        for stage in stages:
            x = stage(x)
        return x
    return run


def assert_sizes(checks: Any) -> None:
    """Assert each :class:`~rearrange.recipe.SizeCheck` in the traced program, raising its
    error (eager's) where it fails.

    * ``torch.compile`` / ``torch.export`` (SymInts): ``torch._check_with``. On sizes with
      a hint (the example's) it is a guard on the relation, not on any one size, so
      every shape that satisfies it shares the graph; it also refines the sizes (a
      length the pattern fixes becomes that constant, a split makes the dim a multiple,
      two dims that must agree become one symbol). A shape that breaks it fails the
      guard, and re-tracing raises the error at once (dynamo reports it as a
      ``TorchRuntimeError`` whose text is ours); ``torch.export`` reports a guard that
      contradicts the given ``Dim`` s as a constraint violation, and the exported
      program checks its inputs against the guards. Unbacked sizes (no hint) get a
      runtime assert in the graph instead.
    * ``torch.jit.trace`` (sizes are 0-d tensors): checked on the example's sizes, as an
      eager call would; the trace records no check.
    * plain ints (a size dynamo specialised): checked at once.
    """
    if not checks:
        return
    torch = _torch()
    for check in checks:
        lhs, rhs = check.lhs, check.rhs
        holds = lhs == rhs if check.relation == "==" else lhs >= rhs
        if isinstance(holds, torch.Tensor):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                if not bool(holds):
                    raise check.failure(_concrete(check.quoted))
        elif type(holds) is bool:
            if not holds:
                raise check.failure(_concrete(check.quoted))
        else:
            torch._check_with(check.error, holds,
                              lambda check=check: check.text(_concrete(check.quoted)))


def _concrete(values: Any) -> Any:
    """``values`` (sizes, tuples of them) as numbers where they have one: a SymInt's hint
    (the size of the example being traced), a traced 0-d tensor's value. Only for an
    error's text: reading a hint adds no guard."""
    torch = _torch()
    if isinstance(values, (tuple, list)):
        return type(values)(map(_concrete, values))
    if isinstance(values, torch.SymInt):
        hint = getattr(values.node, "hint", None)
        return values if hint is None else hint
    if isinstance(values, torch.Tensor) and values.ndim == 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            return int(values)
    return values


def _strict_view(shape: tuple[Any, ...], plan: SymbolicPlan) -> Runner:
    def view(x: Any) -> Any:
        try:
            return x.view(shape)
        except (RuntimeError, ValueError) as error:   # eager: RuntimeError; traced: ValueError
            raise NoViewError(f"copy=False, but no view of the input can express the result "
                              f"(torch: {error})\n  pattern '{plan.pattern}', input shape "
                              f"{tuple(x.shape)}") from None
    return view


def _unsqueeze(positions: tuple[int, ...]) -> Runner:
    def unsqueeze(x: Any) -> Any:
        for position in positions:  # increasing: each lands at its final place
            x = x.unsqueeze(position)
        return x
    return unsqueeze


def _reduced_in_place(reduction: Any, order: tuple[int, ...],
                      trailing: tuple[int, ...]) -> tuple[int, ...] | None:
    """The input dims to reduce instead of ``trailing`` (the plan's reduced dims after
    ``order``), when ``order`` only moves those axes last; else None.

    The kept axes then stay in output order, and torch's reduction result is C-contiguous
    whatever the input's strides, so the plan's merge after it is still a view. A
    callable gets the permuted view, as it always did (its dims are the plan's); prod of
    several axes flattens them (torch's prod takes one dim), which needs them adjacent
    and in order, so that the product runs over the elements in the same order."""
    if callable(reduction) or not trailing:
        return None
    kept = len(order) - len(trailing)
    if any(a >= b for a, b in zip(order[:kept], order[1:kept])):
        return None
    dims = order[kept:]
    if reduction == "prod" and any(b != a + 1 for a, b in zip(dims, dims[1:])):
        return None
    return tuple(sorted(dims))


def _reshape(shape: tuple[int, ...]) -> Runner:
    # torch parses a tuple argument ~0.7 us slower than the same ints unpacked (2.13)
    if not shape:
        return lambda x: x.reshape(())
    return lambda x: x.reshape(*shape)


def _view(shape: tuple[int, ...]) -> Runner:
    if not shape:
        return lambda x: x.view(())
    return lambda x: x.view(*shape)


def _permute(order: tuple[int, ...]) -> Runner:
    return lambda x: x.permute(*order)


def _expand(shape: tuple[int, ...]) -> Runner:
    return lambda x: x.expand(*shape)


def _strided_view(eager: Runner, plan: Plan, sample: Any) -> Runner | None:
    """``eager`` (a chain of view ops) as one ``as_strided`` call where that is safe, else
    None. The layout is the eager chain's own on ``sample``: a view's layout depends only
    on the input's shape and strides, which the runner cache keys on (so does the device),
    and view ops keep the storage offset (checked).

    Per call, ``eager`` runs instead unless :func:`plain_eager` holds (as_strided would
    change what a transform, a dispatch mode or a trace records; a torch-function mode
    sees as_strided like any op) or the tensor requires grad
    (as_strided's backward is slow and less general; under no_grad the view ops cost
    little more). Conjugate and negative views need no test: as_strided keeps those bits
    like every view op."""
    torch = _torch()
    if (type(sample) is not torch.Tensor or sample.layout != torch.strided
            or sample.device.type not in ("cpu", "cuda")
            or not all(type(n) is int for n in sample.shape) or not plain_eager(sample)):
        return None
    probe = eager(sample.detach())
    if probe.storage_offset() != sample.storage_offset() \
            or tuple(probe.shape) != plan.output.shape:  # pragma: no cover - view ops
        return None
    shape, strides = tuple(probe.shape), probe.stride()
    plain = _plain_eager or _bind_plain_eager()

    def view(x: Any) -> Any:
        if x.requires_grad or not plain(x):
            return eager(x)
        return x.as_strided(shape, strides)
    return view


def plain_eager(x: Any) -> bool:
    """Is ``x`` an exact ``torch.Tensor`` in plain eager mode, where nothing below
    torch's Python API watches — no dispatch mode (make_fx, FakeTensorMode,
    FlopCounterMode, a user's mode), no functorch transform (vmap, grad, functionalize,
    jvp), no forward-mode AD level, no torch.compile or torch.jit.trace tracing? Only
    then may a call choose ops by the concrete layout (one ``as_strided`` for a chain of
    views): a trace would record strides that other inputs do not have. Cheap: an
    identity test and C calls, bound once (:func:`_bind_plain_eager`)."""
    return (_plain_eager or _bind_plain_eager())(x)


_plain_eager: Callable[[Any], bool] | None = None


def _bind_plain_eager() -> Callable[[Any], bool]:
    """:func:`plain_eager` with torch's functions bound as locals (it runs on the warm
    path of every torch view), made once, after a torch tensor has been seen."""
    global _plain_eager
    torch = _torch()
    Tensor, C = torch.Tensor, torch._C
    dispatch_depth = C._len_torch_dispatch_stack
    transforms_active = C._are_functorch_transforms_active
    tracing = C._get_tracing_state
    forward_ad = sys.modules["torch.autograd.forward_ad"]
    compiling = torch.compiler.is_compiling

    def bound(x: Any) -> bool:
        return (type(x) is Tensor and not dispatch_depth() and not transforms_active()
                and tracing() is None and forward_ad._current_level < 0
                and not compiling())
    _plain_eager = bound
    return bound


def kernel_may_copy(x: Any) -> bool:
    """The copy kernel's one eligibility test for a torch tensor, checked on every copy:
    :func:`plain_eager`, no torch-function mode either (it would not see the copy), a
    CPU tensor with real storage whose copy autograd need not record, and whose memory
    is its values (no lazy conjugate or negative bit). Anything else is copied by torch
    itself, through its dispatcher, where every transform and mode sees it."""
    torch = _torch()
    return (plain_eager(x) and x.device.type == "cpu"
            and not torch._C._is_torch_function_mode_enabled()
            and not (x.requires_grad and torch.is_grad_enabled())
            and not x.is_conj() and not x.is_neg() and torch._C._has_storage(x))


def _copier(kernel: Any, fresh_even_if_contiguous: bool) -> Runner:
    from .. import kernel as K
    from ..kernel.pages import HUGE_PAGES_MIN_BYTES, advise_huge_pages, untouched

    torch = _torch()
    use_kernel = kernel is not None and kernel.variant != "torch"

    def copy(x: Any) -> Any:
        if use_kernel and kernel_may_copy(x) \
                and K.compiled_runner(kernel) is not None:      # else: torch's, at once
            out = torch.empty(x.shape, dtype=x.dtype)
            nbytes = out.numel() * out.element_size()
            if nbytes >= HUGE_PAGES_MIN_BYTES and untouched(out.data_ptr(), nbytes):
                # a fresh mapping: as numpy does for its own arrays, the first touch (the
                # copy's) faults 2 MiB pages, not 4 KiB ones (torch's allocator does not
                # ask; memory it reuses is left alone: advice there only costs)
                advise_huge_pages(out.data_ptr(), nbytes)
            K.copy_into(out.numpy(), x.detach().numpy())
            return out
        if fresh_even_if_contiguous:
            return x.clone(memory_format=torch.contiguous_format)
        return x.contiguous()
    return copy


def _reducer(reduction: Any, dims: tuple[int, ...], dtype: str | None = None) -> Runner:
    """``reduction`` over ``dims``: the plan's trailing dims, or (for a named reduction)
    the input dims that hold the reduced axes, in increasing order. ``dtype`` is the
    input's (the runner cache keys on it), None where unknown."""
    torch = _torch()
    if callable(reduction):
        return lambda x: reduction(x, dims)
    first, last = dims[0], dims[-1]
    # one dim as an int: torch parses it faster than a tuple, with the same result
    dim: Any = first if len(dims) == 1 else dims

    def to_float(x: Any) -> Any:
        # numpy's promotion: integer and bool means (and friends) are float64
        return x if x.is_floating_point() or x.is_complex() else x.to(torch.float64)

    # float and complex inputs keep their dtype: no per-call test needed
    inexact = dtype is not None and dtype.startswith(("float", "bfloat", "complex"))

    def logsumexp(x: Any) -> Any:
        # torch sums float16/bfloat16 exp terms in their own dtype: a few thousand
        # terms overflow to inf. Computed in float32, returned in the input's dtype.
        if x.dtype in (torch.float16, torch.bfloat16):
            return torch.logsumexp(x.float(), dim).to(x.dtype)
        return torch.logsumexp(to_float(x), dim)

    def as_bool(x: Any) -> Any:
        # torch's any/all of uint8 return uint8 (kept for backward compatibility);
        # the documented result is bool
        return x if x.dtype == torch.bool else x.to(torch.bool)

    def ordered(x: Any) -> Any:
        # torch has no argmax/argmin of bool; False < True as uint8 too
        return x.to(torch.uint8) if x.dtype == torch.bool else x

    table: dict[str, Callable[[Any], Any]] = {
        "sum": lambda x: x.sum(dim),
        "mean": (lambda x: x.mean(dim)) if inexact else lambda x: to_float(x).mean(dim),
        "min": lambda x: x.amin(dim),
        "max": lambda x: x.amax(dim),
        # dims are adjacent (see _reduced_in_place): torch's prod takes one dim
        "prod": lambda x: x.flatten(first, last).prod(first) if len(dims) > 1 else x.prod(first),
        "any": lambda x: as_bool(x.any(dim)),
        "all": lambda x: as_bool(x.all(dim)),
        "var": (lambda x: x.var(dim, correction=0)) if inexact
        else lambda x: to_float(x).var(dim, correction=0),
        "std": (lambda x: x.std(dim, correction=0)) if inexact
        else lambda x: to_float(x).std(dim, correction=0),
        "logsumexp": logsumexp,
        "argmax": lambda x: ordered(x).argmax(first),
        "argmin": lambda x: ordered(x).argmin(first),
        "count_nonzero": lambda x: torch.count_nonzero(x, dim=dim),
    }
    reduce = table[reduction]
    if reduction in _STEPWISE and any(b != a + 1 for a, b in zip(dims, dims[1:])):
        reduce = _stepwise(reduction, dims, reduce)

    def run(x: Any) -> Any:
        try:
            return reduce(x)
        except (RuntimeError, IndexError, TypeError) as error:
            # e.g. amax over a zero-size dim; torch has no max of uint64 or complex
            # (NotImplementedError, a RuntimeError)
            raise reduction_error(reduction, error) from None
    return run


# Reductions whose value over several dims is their value over one dim after another,
# exactly (no rounding), and the torch method that reduces one dim.
_STEPWISE = {"min": "amin", "max": "amax", "any": "any", "all": "all"}


def _stepwise(reduction: str, dims: tuple[int, ...], at_once: Runner) -> Runner:
    """``reduction`` over non-adjacent ``dims`` one dim at a time, last first (so the
    others keep their index): torch reduces dims that do not coalesce slowly, e.g. max
    over (3, 5) of (8, 64, 64, 2, 64, 2) took 54 ms at once and 12 ms stepwise, and
    2x2 max-pooling of a (2, 3, 16, 16) tensor 15 µs against 11.

    The values are the same, but where ties share the gradient (amax's backward and
    forward derivative split it evenly over the tied elements of the whole reduced set),
    stepwise splits it differently: so ``at_once`` runs whenever anything differentiates
    (autograd on the input, a forward-mode dual level, functorch transforms), and under
    torch.jit.trace (whose check re-runs the function, possibly with other grad flags:
    the two graphs must be the same)."""
    torch = _torch()
    method = getattr(torch.Tensor, _STEPWISE[reduction])
    last_first = tuple(reversed(dims))
    transforms_active = torch._C._are_functorch_transforms_active
    tracing = torch._C._get_tracing_state
    forward_ad = sys.modules["torch.autograd.forward_ad"]

    def reduce(x: Any) -> Any:
        if x.requires_grad or forward_ad._current_level >= 0 or transforms_active() \
                or tracing() is not None:
            return at_once(x)
        for dim in last_first:
            x = method(x, dim)
        return x if reduction not in ("any", "all") or x.dtype == torch.bool \
            else x.to(torch.bool)
    return reduce


# ---------------------------------------------------------------------- pack, unpack, einsum

def reshape(x: Any, shape: tuple[int, ...]) -> Any:
    check(x)
    return x.reshape(*shape) if shape else x.reshape(())  # unpacked: see _reshape


def concat(xs: list[Any], axis: int) -> Any:
    for x in xs:
        check(x)
    return _torch().cat(xs, dim=axis)


def lower_pack(plan: Any, dtype: Any) -> Any:
    """A pack plan as torch calls: each input reshaped to its place (a view wherever
    torch makes one) and one ``torch.cat`` along the packed dim (which promotes the
    dtypes as the plan does). Each input is checked dense once (the plan cache's key
    has no layout). Traced sizes take ``packing._pack_traced`` instead."""
    torch = _torch()
    cat, strided = torch.cat, torch.strided
    axis = plan.axis
    shapes = [(*layout.shape[:axis], math.prod(packed),
               *layout.shape[axis + len(packed):])
              for layout, packed in zip(plan.inputs, plan.packed_shapes)]

    def run(xs: Any) -> Any:
        pieces = []
        for x, shape in zip(xs, shapes):
            if x.layout is not strided or x.is_nested:
                check(x)
            pieces.append(x.reshape(shape))
        return cat(pieces, dim=axis)
    return run


def lower_unpack(plan: Any) -> Any:
    """An unpack plan as torch calls: one ``split_with_sizes`` of the packed dim into
    every output's length (views), each reshaped to the output's shape (a split of one
    dim: always a view). The packed tensor is checked dense before the runner is
    reached (by the planner, and by ``packing.unpack``'s warm path)."""
    axis = plan.axis
    lengths = [math.prod(packed) for packed in plan.packed_shapes]
    shapes = [output.shape for output in plan.outputs]

    def run(x: Any) -> list[Any]:
        return [piece.reshape(shape)
                for piece, shape in zip(x.split_with_sizes(lengths, axis), shapes)]
    return run


def einsum(subscripts: str, *xs: Any) -> Any:
    for x in xs:
        check(x)
    return _torch().einsum(subscripts, *xs)


def describe_einsum(plan: Any, xs: Any) -> Any:
    """The engine that contracts: ``torch.matmul`` for a batched matrix product of two
    float or complex tensors of one dtype (torch.einsum's own route for it, minus ~13 µs
    of bookkeeping), else ``torch.einsum``. Other dtypes keep einsum and its errors: no
    integer matmul on CUDA, no bool matmul, no mixed dtypes."""
    from ..contraction import matmul_form, with_engine

    form = matmul_form(plan)
    if form is not None and xs[0].dtype == xs[1].dtype \
            and (xs[0].is_floating_point() or xs[0].is_complex()):
        return with_engine(plan, "torch.matmul", form.describe(dict(plan.letters)))
    return with_engine(plan, "torch.einsum", "torch.einsum (its own contraction order)")


def lower_einsum(plan: Any) -> Callable[[Any], Any]:
    """A plan from :func:`describe_einsum` as torch ops: ``runner(tensors) -> result``.
    Each input's rearrange (a view) and the output's (merges: ``reshape``, since
    torch.einsum may return a non-contiguous tensor) around the engine the plan names."""
    from ..contraction import matmul_form

    torch = _torch()
    prepare = [None if p is None else lower(p.plan, None) for p in plan.preparations]
    finish = None if plan.output_pattern is None else _reshape(plan.output.shape)
    form = matmul_form(plan) if plan.engine == "torch.matmul" else None
    if form is None:
        subscripts, einsum = plan.subscripts, torch.einsum

        def contract(xs: Any) -> Any:
            return einsum(subscripts, *[x if p is None else p(x) for x, p in zip(xs, prepare)])
        return contract if finish is None else lambda xs: finish(contract(xs))

    left = _compose([prepare[0], *_shaped(form.left_order, form.left_shape)])
    right = _compose([prepare[1], *_shaped(form.right_order, form.right_shape)])
    # the product is C-contiguous: when nothing permutes it, the output's reshape alone
    # gives the final shape
    result_shape = None if finish is not None and form.output_order is None \
        else form.result_shape
    after = _compose([*_shaped(None, result_shape), *_shaped(form.output_order, None), finish])
    matmul = torch.matmul
    if left is None and after is None:
        if right is None:
            return lambda xs: matmul(xs[0], xs[1])
        return lambda xs: matmul(xs[0], right(xs[1]))
    left, right, after = (f or _same for f in (left, right, after))
    return lambda xs: after(matmul(left(xs[0]), right(xs[1])))


def _same(x: Any) -> Any:
    return x


def _shaped(order: tuple[int, ...] | None, shape: tuple[int, ...] | None) -> list[Runner]:
    return [stage for stage in (None if order is None else _permute(order),
                                None if shape is None else _reshape(shape)) if stage]


def _compose(stages: list[Runner | None]) -> Runner | None:
    present = [stage for stage in stages if stage is not None]
    return _chain(present) if present else None
