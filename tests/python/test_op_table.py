"""ATen kernels the npu gets without writing them (torch_bridge/csrc/aten/aten_table.cpp): the elementwise ops'
functional overloads from the compiler's op table (compiler/ops.def), and the in-place and out= forms of every
op with a functional npu kernel. These tests check the derivation against the table and the schemas, and every
derived overload of the table's ops against the CPU."""

import re
from pathlib import Path

import pytest
import torch

import npusim

NPU = "npu"
OPS_DEF = Path(__file__).resolve().parents[2] / "compiler" / "ops.def"


def _rows():
    """ops.def's elementwise rows: {name: (arity, result, dtypes)}."""
    rows = {}
    for m in re.finditer(r'^NPU_ELEMENTWISE_OP\(\s*\w+,\s*"(\w+)",\s*(\d),\s*\w+,\s*(\w+),\s*(\w+)\)', OPS_DEF.read_text(), re.M):
        rows[m.group(1)] = (int(m.group(2)), m.group(3), m.group(4))
    return rows


ROWS = _rows()
REGISTERED = npusim._C.table_ops()
TABLE, DERIVED = sorted(REGISTERED["table"]), sorted(REGISTERED["derived"])


def _parts(name):
    """'eq_.Scalar' -> ('eq', 'Scalar', in_place=True)."""
    base, _, overload = name.partition(".")
    return base.rstrip("_"), overload, base.endswith("_")


def test_the_table_gives_each_rows_plain_functional_overloads():
    for name in TABLE:
        row, overload, in_place = _parts(name)
        assert row in ROWS and not in_place and not overload.endswith("out"), name
    # Every row whose ATen op takes its inputs plainly came through (add and sub take an alpha, and div.Tensor
    # promotes integers: theirs are written by hand; copy, to and the gelus have other schemas).
    covered = {_parts(name)[0] for name in TABLE}
    assert set(ROWS) - covered == {"add", "sub", "div", "copy", "to", "gelu", "gelu_tanh", "div_trunc"}
    for name in ("exp", "relu", "eq.Tensor", "eq.Scalar", "maximum", "mul.Tensor", "bitwise_and.Tensor", "pow.Tensor_Scalar"):
        assert name in TABLE, name


def test_in_place_and_out_forms_are_derived_from_every_functional_kernel():
    registered = set(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
    # The table's ops and hand-written ones alike (mm, the paddings, the activations).
    for name in ("exp_", "exp.out", "eq_.Tensor", "eq.Scalar_out", "maximum.out", "mul_.Tensor", "add.out", "add_.Tensor",
                 "mm.out", "bmm.out", "log1p.out", "hardswish_", "reflection_pad2d.out", "tril.out", "hypot.out"):
        assert name in DERIVED and "aten::" + name in registered, name
    # Kernels written for a form keep it: div.Tensor's integer promotion, the fused optimizers' in-place ops.
    assert "div.Tensor" not in TABLE + DERIVED and "div.out" in DERIVED
    for name in DERIVED:
        assert name not in TABLE
    assert len(DERIVED) > 100


def _inputs(row_name, dtype):
    torch.manual_seed(0)
    if dtype.is_floating_point:
        a, b = torch.rand(3, 5) + 0.5, torch.rand(5) + 0.5  # positive: log, sqrt and pow stay real
        return a.to(dtype), b.to(dtype), 0.75
    low = 0 if dtype == torch.uint8 else -100
    if "shift" in row_name:
        return torch.randint(low, 100, (3, 5), dtype=dtype), torch.randint(0, 7, (5,), dtype=dtype), 3
    return torch.randint(low, 100, (3, 5), dtype=dtype), torch.randint(low, 100, (5,), dtype=dtype), 7


def _dtypes(row_name):
    kinds = ROWS[row_name][2]
    return {"Floats": [torch.float32, torch.bfloat16], "Ints": [torch.int32, torch.uint8], "All": [torch.float32, torch.int32]}[kinds]


def _first_input_is_a_tensor(name):
    base, _, overload = name.partition(".")
    return str(torch._C._get_schema("aten::" + base, overload).arguments[0].type) == "Tensor"


# (Not pow.Scalar_out, whose base is the Scalar: its functional form, pow.Scalar, is written by hand.)
TABLE_FORMS = sorted(set(TABLE) | {name for name in DERIVED
                                   if _parts(name)[0] in ROWS and _parts(name)[0] != "div" and _first_input_is_a_tensor(name)})
CASES = [(name, dtype) for name in TABLE_FORMS for dtype in _dtypes(_parts(name)[0])]


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{str(d).split('.')[1]}" for n, d in CASES])
def test_each_form_of_the_tables_ops_matches_the_cpu_on_the_chip(name, dtype):
    row, overload, in_place = _parts(name)
    op = getattr(getattr(torch.ops.aten, name.split(".")[0]), overload or "default")
    a, b, scalar = _inputs(row, dtype)
    args = [a] if ROWS[row][0] == 1 else [a, scalar if "Scalar" in overload else b]
    npu_args = [x.to(NPU) if isinstance(x, torch.Tensor) else x for x in args]
    before = dict(npusim._C.fallback_stats())
    if in_place:
        try:
            expected = op(args[0].clone(), *args[1:])
        except RuntimeError as error:  # (an integer's exp_: ATen's check, which the npu must make too)
            with pytest.raises(RuntimeError, match=re.escape(str(error).splitlines()[0])):
                op(npu_args[0].clone(), *npu_args[1:])
            return
        got = op(npu_args[0], *npu_args[1:])
        assert got.data_ptr() == npu_args[0].data_ptr()
    elif overload.endswith("out"):
        result_dtype = torch.bool if ROWS[row][1] == "Bool" else a.dtype
        expected = op(*args, out=torch.empty(0, dtype=result_dtype))
        out = torch.empty(0, dtype=result_dtype, device=NPU)
        got = op(*npu_args, out=out)
        assert got.data_ptr() == out.data_ptr()
    else:
        expected = op(*args)
        got = op(*npu_args)
    fallbacks = {k: v - before.get(k, 0) for k, v in npusim._C.fallback_stats().items() if v != before.get(k, 0)}
    # On the chip unless the row cannot take the dtype (an integer's exp goes to the CPU, as its float result).
    if ROWS[row][2] != "Floats" or dtype.is_floating_point:
        assert not fallbacks, fallbacks
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if expected.dtype.is_floating_point:
        tolerance = {torch.float32: 2e-6, torch.bfloat16: 1e-2}[expected.dtype]
        torch.testing.assert_close(got.cpu(), expected, rtol=tolerance, atol=tolerance)
    else:
        assert torch.equal(got.cpu(), expected)


def test_derived_forms_of_hand_written_kernels_match_the_cpu():
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(6, 5)
    cases = {
        "mm.out": lambda d: torch.mm(x.to(d), y.to(d), out=torch.empty(0, device=d)),
        "log1p.out": lambda d: torch.log1p(x.abs().to(d), out=torch.empty(0, device=d)),
        "reflection_pad1d.out": lambda d: torch.ops.aten.reflection_pad1d.out(x[None].to(d), [2, 1], out=torch.empty(0, device=d)),
        "hardswish_": lambda d: torch.nn.functional.hardswish(x.clone().to(d), inplace=True),
        "add_.Tensor": lambda d: x.clone().to(d).add_(y[:, 0].to(d)[:, None].expand(6, 4).T, alpha=2),
    }
    for name, run in cases.items():
        assert name in DERIVED, name
        expected = run("cpu")
        before = dict(npusim._C.fallback_stats())
        got = run(NPU)
        assert npusim._C.fallback_stats() == before, name
        torch.testing.assert_close(got.cpu(), expected, rtol=2e-6, atol=2e-6)


def test_derived_forms_keep_atens_checks():
    x = torch.arange(6, dtype=torch.int32, device=NPU)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        x.exp_()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        torch.maximum(torch.rand(6, device=NPU), torch.rand(6, device=NPU), out=torch.empty(6, dtype=torch.int32, device=NPU))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.ones(3, device=NPU).mul_(torch.ones(2, 3, device=NPU))
    # A CPU operand that is not a scalar is the device mismatch the CPU and CUDA report.
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.eq(torch.ones(3, device=NPU), torch.ones(3), out=torch.empty(3, dtype=torch.bool, device=NPU))


def test_table_and_derived_kernels_read_nothing_back_to_the_host():
    a, b = torch.rand(64, device=NPU), torch.rand(64, device=NPU)
    with npusim.profile() as prof:
        torch.eq(a, b)
        torch.mul(a, b, out=torch.empty(64, device=NPU))
        a.clone().mul_(b).exp_()
        torch.maximum(a, b)
    assert len(prof.kernels) >= 5
    assert not [t for t in prof.host_transfers if t[3] == "to host" and t[4] == "data"], prof.host_transfers


def test_the_bridges_sources_depend_only_down_their_layers():
    """torch_bridge/csrc: runtime/ (the device) includes nothing of aten/ or composites/, aten/ (the
    kernels) nothing of composites/; each include of another folder names it ("runtime/runtime.h")."""
    csrc = Path(__file__).resolve().parents[2] / "torch_bridge" / "csrc"
    below = {"runtime": set(), "aten": {"runtime"}, "composites": {"runtime", "aten"}}
    local = {folder: {p.name for p in (csrc / folder).iterdir()} for folder in below}
    for folder, allowed in below.items():
        for source in sorted((csrc / folder).iterdir()):
            for included in re.findall(r'#include "([^"]+)"', source.read_text()):
                if "/" in included:
                    layer = included.split("/")[0]
                    assert layer not in below or layer in allowed, f"{folder}/{source.name} includes {included}"
                else:
                    others = [f for f, names in local.items() if f != folder and included in names]
                    assert not others, f"{folder}/{source.name} includes {included} of {others} without naming the folder"


# ---- the hand-written kernels' table: torch_bridge/npu_native_functions.yaml ----

BRIDGE = Path(__file__).resolve().parents[2] / "torch_bridge"


def _native_functions_table():
    """The yaml's supported ops by the source file heading their group: {"aten/ops.cpp": ["add.Tensor", ...]}."""
    groups, current = {}, None
    in_supported = False
    for line in (BRIDGE / "npu_native_functions.yaml").read_text().splitlines():
        if line == "supported:":
            in_supported = True
        elif in_supported and line.startswith("  # "):
            current = line[4:]
            groups[current] = []
        elif in_supported and line.startswith("  - "):
            assert current is not None, line
            groups[current].append(line[4:])
    return groups


def test_every_aten_kernel_of_the_npu_comes_from_the_tables():
    """The npu's aten kernels are the yaml's ops, ops.def's elementwise overloads and the forms derived from
    both; nothing registers one by hand."""
    table = {op for ops in _native_functions_table().values() for op in ops}
    registered = {name[len("aten::"):] for name in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
                  if name.startswith("aten::")}
    derived_or_table = table | set(TABLE) | set(DERIVED)
    assert registered - derived_or_table == set() and derived_or_table - registered == set()
    assert not table & (set(TABLE) | set(DERIVED))
    for source in sorted((BRIDGE / "csrc").rglob("*.cpp")):
        assert not re.search(r"TORCH_LIBRARY_IMPL\(aten, PrivateUse1", source.read_text()), source


def test_each_kernel_is_defined_in_the_file_its_group_names():
    from torchgen.api import dispatcher
    from torchgen.model import FunctionSchema

    symint = set()
    text = (BRIDGE / "npu_native_functions.yaml").read_text()
    for line in text.split("symint:\n", 1)[1].split("supported:", 1)[0].splitlines():
        if line.startswith("- "):
            symint.add(line[2:])
    for group, ops in _native_functions_table().items():
        source = (BRIDGE / "csrc" / group).read_text()
        for op in ops:
            schema = str(torch._C._get_schema(f"aten::{op.partition('.')[0]}", op.partition(".")[2])).removeprefix("aten::")
            name = dispatcher.name(FunctionSchema.parse(schema)) + ("_symint" if op in symint else "")
            # (Defined directly, or by a macro's row: NPUSIM_ELEMENTARY(tan, tan_f32).)
            defined = rf"NpuNativeFunctions::{name}\(|^[A-Z_]+\({name}, "
            assert re.search(defined, source, re.M), f"{op}: NpuNativeFunctions::{name} is not in csrc/{group}"
