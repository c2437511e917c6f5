"""PyTorch's own OpInfo samples on the npu device.

The ops under test are derived, not listed: every op of
torch.testing._internal.common_methods_invocations.op_db whose ATen operator
has a kernel registered for the npu (PrivateUse1) runs every sample input, in
float32 and bfloat16 where the CPU supports them, on the npu and on the CPU,
and the results are compared:
  - float32: torch.testing.assert_close's defaults (rtol 1.3e-6, atol 1e-5);
  - bfloat16: rtol 1.6e-2 (the default) and atol 1e-2: the chip computes in
    f32 and rounds once, the CPU's bf16 kernels round differently, and values
    near zero after cancellation differ by more than the default 1e-5 allows;
  - ops with neither float dtype: complex64 where they take it (view_as_real), else (bitwise_and) bool
    and int32, exactly;
  - elementwise ops (OpInfo's unary and binary ufuncs): also the result's strides, as ATen lays them
    out (TensorIterator's rule), over the dims longer than 1.
Ops whose results are undefined (the empty family) are compared on shape,
dtype and strides only; random ops (bernoulli) on shape, dtype and their
support (0 or 1; certain where p is 0 or 1), multinomial on shape, dtype and
categories of positive probability, since the npu's generator is not the
CPU's (test_random.py checks its values against a reference). topk, whose
order among equal values (and, unsorted, at all) PyTorch leaves open: its
values as the CPU's (sorted first where the sample does not ask for them
sorted) and its indices picking exactly those values. Pass counts per op are printed (pytest -s shows them).
"""
import collections

import pytest
import torch

import expecttest  # noqa: E402,F401  (torch.testing._internal needs it; scripts/setup.sh installs it)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo  # noqa: E402

import npusim  # noqa: E402,F401

NPU = torch.device("npu")
UNDEFINED_VALUES = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"}
RANDOM_VALUES = {"bernoulli"}
SAMPLED = {"multinomial"}
TIES_OPEN = {"topk"}


def topk_arguments(sample):
    names = ("k", "dim", "largest", "sorted")
    given = dict(zip(names, sample.args), **sample.kwargs)
    return given.get("dim", -1), given.get("sorted", True)


def has_npu_kernel(aten_name: str) -> bool:
    packet = getattr(torch.ops.aten, aten_name, None)
    if packet is None:
        return False
    for overload in packet.overloads():
        name = f"aten::{aten_name}" + ("" if overload == "default" else f".{overload}")
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
                return True
        except RuntimeError:  # an overload only TorchScript knows (aten::acos.int)
            continue
    return False


SUPPORTED = [op for op in op_db if has_npu_kernel(op.aten_name or op.name)]
POINTWISE = (UnaryUfuncInfo, BinaryUfuncInfo)


def layout(t: torch.Tensor):
    """The strides that matter: those of dims longer than 1 (a dim of one element may have any)."""
    return tuple(stride for size, stride in zip(t.shape, t.stride()) if size > 1)


def to_npu(value):
    if isinstance(value, torch.Tensor):
        base = value._base
        if base is not None and base.is_contiguous() and base.storage_offset() == 0:
            # A view: move its whole base and view it the same way, so that ops which
            # reach past the view into its storage (as_strided) see the same elements.
            return base.to(NPU).as_strided(value.size(), value.stride(), value.storage_offset())
        return value.to(NPU)
    if isinstance(value, (list, tuple)):
        return type(value)(to_npu(v) for v in value)
    return value


def to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def test_the_supported_ops_are_derived_from_the_registrations():
    names = {op.name for op in SUPPORTED}
    for expected in ("add", "mul", "mm", "bmm", "addmm", "sum", "amax", "view", "as_strided"):
        assert expected in names, expected
    assert len(SUPPORTED) >= 30


@pytest.mark.parametrize("op", SUPPORTED, ids=lambda op: op.name + ("." + op.variant_test_name if op.variant_test_name else ""))
def test_every_sample_matches_the_cpu(op):
    counts = collections.Counter()
    dtypes = (torch.float32, torch.bfloat16)
    if not any(d in op.supported_dtypes("cpu") for d in dtypes):
        # complex ops (view_as_real): complex64; integer and bool ops (bitwise_and): those, exactly
        dtypes = (torch.complex64,) if torch.complex64 in op.supported_dtypes("cpu") else (torch.bool, torch.int32)
    for dtype in dtypes:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
            expected = op(sample.input, *sample.args, **sample.kwargs)
            actual = op(to_npu(sample.input), *to_npu(sample.args), **{k: to_npu(v) for k, v in sample.kwargs.items()})
            where = f"{op.name} {dtype} input {tuple(getattr(sample.input, 'shape', ()))} args {sample.args} kwargs {sample.kwargs}"
            if op.name in UNDEFINED_VALUES:
                assert actual.shape == expected.shape and actual.dtype == expected.dtype and actual.stride() == expected.stride(), where
            elif op.name in SAMPLED:
                actual, p = to_cpu(actual), sample.input
                assert actual.shape == expected.shape and actual.dtype == expected.dtype, where
                assert (p.reshape(-1, p.shape[-1]).gather(-1, actual.reshape(p.reshape(-1, p.shape[-1]).shape[0], -1)) > 0).all(), where
            elif op.name in TIES_OPEN:
                (values, indices), (want, _) = to_cpu(actual), expected
                dim, is_sorted = topk_arguments(sample)
                if sample.input.dim() > 0:
                    torch.testing.assert_close(torch.gather(sample.input, dim, indices), values, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{where}: {m}")
                    if not is_sorted:
                        values, want = values.sort(dim).values, want.sort(dim).values
                torch.testing.assert_close(values, want, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{where}: {m}")
            elif op.name in RANDOM_VALUES:
                actual, p = to_cpu(actual), sample.input
                assert actual.shape == expected.shape and actual.dtype == expected.dtype, where
                assert ((actual == 0) | (actual == 1)).all() and (actual[p == 0] == 0).all() and (actual[p == 1] == 1).all(), where
            else:
                actual = to_cpu(actual)
                tolerance = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
                torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{where}: {m}", **tolerance)
                if isinstance(op, POINTWISE) and isinstance(expected, torch.Tensor):
                    assert layout(actual) == layout(expected), f"{where}: strides {actual.stride()}, the CPU's {expected.stride()}"
            counts[str(dtype).replace("torch.", "")] += 1
    print(f"{op.name}: {dict(counts)} samples passed")
    assert sum(counts.values()) > 0
