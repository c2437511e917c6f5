// A copy that changes the layout (permute(...).contiguous(), NCHW <-> NHWC,
// x.transpose(1, 2).contiguous()) as blocked 2-D transposes whose DRAM runs
// are long on both sides.
//
// After merging the dims that stay neighbours, the input's unit-stride dim (a)
// and the output's (z) differ. A tile is a block P of the input's contiguous
// run (part of a; or all of a and part of a2, the dim that continues a in the
// input) by a block Q of the output's (part of z; or all of z and part of z2,
// the dim before z in the output). It is loaded as Q runs of P elements,
// turned over by v.trans into P runs of Q elements and stored: each run is
// RUN_BYTES or more on both sides where the dims allow (the elementwise
// kernel's tiles follow single dims, whose runs are as short as the dims:
// 32 bytes for a dim of 16 bf16). The dims left are the tiles' loop.
//   dma ch0: the tile's Q runs of P                        -> vector
//   vector:  v.trans [Q x P] -> [P x Q]                    -> dma ch2
//   dma ch2: its P runs of Q
// A short run that both sides share (2 bf16 of a pixel shuffle) is folded into
// one element of its width first; a longer one still shorter than a DMA
// request (a permute that keeps the last dim of 64 bf16) moves as a piece, and
// the store's DMA writes the pieces of a [Q][P] tile in [P][Q] order (no
// v.trans; the Q pieces of an output run adjacent in DRAM). Applies to a copy
// into a dense output of blocks that divide their dims; the elementwise kernel
// takes the others.
// Where both contiguous runs are shorter than a request and continue into the
// same dim m (m follows a in the input and precedes z in the output:
// permute(1, 3, 2, 0) of [N, C, H, W], whose runs are W and N with H between),
// a tile is all of z, a block of m and all of a, [z][m][a] as loaded, and two
// v.trans turn it over: each [m][a] plane into [a][m], then [z][(a m)] into
// [(a m)][z] (three_dim_transpose).
#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "elementwise.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {
namespace {

using isa::Opcode;

// A tile's bytes, up to which small tiles take a batch of another dim.
constexpr int64_t kTileBytes = 128 * 1024;

struct Dim {
  int64_t size = 1, in_stride = 0, out_stride = 0;  // elements
};

// A block of a dim of n elements of `unit` bytes: all of it where that is under `want` bytes, else
// its smallest divisor of `want` bytes or more (0 where that is over 8 x want: a prime length).
int64_t block_of(int64_t n, int64_t unit, int64_t want) {
  if (n * unit < want) return n;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0 && d * unit >= want) return d * unit <= 8 * want ? d : 0;
  return 0;
}

// A DMA of runs of `run` elements, contiguous on both sides, repeated over two dims strided on both.
struct DmaDims {
  struct Outer {
    int64_t count = 1, dram_stride = 0, local_stride = 0;  // elements
  };
  int64_t run = 0;
  Outer inner, outer;
};

// The two outer dims in the order of their DRAM strides (the inner one the nearer, so that the DRAM
// addresses run on where they can), and each folded into the run where it continues it on both sides.
DmaDims arranged(DmaDims dma) {
  if (dma.outer.count > 1 && std::abs(dma.outer.dram_stride) < std::abs(dma.inner.dram_stride)) std::swap(dma.inner, dma.outer);
  for (int i = 0; i < 2; ++i)
    if (dma.inner.count == 1 || (dma.inner.dram_stride == dma.run && dma.inner.local_stride == dma.run)) {
      dma.run *= dma.inner.count;
      dma.inner = dma.outer;
      dma.outer = {};
    }
  return dma;
}

// The tiles' loop: every dim, in the output's order, in blocks where `block(d)` cuts one from dim d.
struct TileLoop {
  std::vector<int64_t> dims, in_strides, out_strides;  // elements
  int64_t tiles = 1;
};
template <typename BlockOf>
TileLoop tile_loop(const std::vector<Dim>& dims, BlockOf block) {
  TileLoop loop;
  for (int64_t d = 0; d < int64_t(dims.size()); ++d) {
    const Dim& dim = dims[size_t(d)];
    const int64_t n = block(d);
    if (dim.size / n == 1) continue;
    loop.dims.push_back(dim.size / n), loop.in_strides.push_back(dim.in_stride * n), loop.out_strides.push_back(dim.out_stride * n);
  }
  if (loop.dims.empty()) loop.dims = {1}, loop.in_strides = {0}, loop.out_strides = {0};
  for (const int64_t n : loop.dims) loop.tiles *= n;
  return loop;
}

// The registers of a tile's DMA, and its emission: a load into `local` from `addr`, or a store from
// `local` to `addr`, of `shape` in elements of e bytes.
struct CopyDma {
  Reg n0, n1, n2, ds1, ss1, ds2, ss2;
  void emit(ProgramBuilder& b, Opcode opcode, int64_t channel, Reg local, Reg addr, const DmaDims& shape, int64_t e) const {
    const bool is_load = opcode == Opcode::DMA_LD;
    b.li(n0, shape.run * e), b.li(n1, shape.inner.count), b.li(n2, shape.outer.count);
    b.li(is_load ? ss1 : ds1, shape.inner.dram_stride * e), b.li(is_load ? ds1 : ss1, shape.inner.local_stride * e);
    b.li(is_load ? ss2 : ds2, shape.outer.dram_stride * e), b.li(is_load ? ds2 : ss2, shape.outer.local_stride * e);
    const Reg dst = is_load ? local : addr, src = is_load ? addr : local;
    b.emit(opcode, {channel, dst.index, src.index, n0.index, n1.index, n2.index, ds1.index, ss1.index, ds2.index, ss2.index});
  }
};

// What both transposing copies begin with: the tensors' symbols, the tiles split over the cores, each
// core's tiles visited from a rotated start (rotation_over_cores: where the output's runs of one tile all
// lie on some of the DRAM channels, runs of 512 bytes a period of 1 KiB apart on base, two of four, cores
// then store to all of them at once; transpose(1, 2) of 12 x 512 x 512 bf16 on base: 58.8% of the
// roofline -> 82.3%), and the tensors' base addresses. A core without tiles branches to `done`.
struct TileWalk {
  Reg t, t_end, t_first, rotation, u;  // tile t of [t_first, t_end) is visited as tile u (visited_item)
  Label done;
  Reg in_base, out_base;
};
TileWalk begin_tile_walk(ProgramBuilder& b, const TensorDesc& in, const TensorDesc& out, int64_t tiles, int64_t e) {
  const uint16_t out_sym = b.output("out", out.dtype, {static_cast<uint64_t>(out.storage_extent())});
  const uint16_t in_sym = b.input("in0", in.dtype, {static_cast<uint64_t>(std::max<int64_t>(in.storage_extent(), 1))});
  TileWalk w;
  w.t = b.reg(), w.t_end = b.reg(), w.t_first = b.reg(), w.rotation = b.reg(), w.u = b.reg();
  w.done = b.label();
  b.split_over_cores(tiles, w.t, w.t_end);
  b.branch(Opcode::BGE, {w.t.index, w.t_end.index}, w.done);
  b.mov(w.t_first, w.t);
  b.rotation_over_cores(w.t_first, w.t_end, w.rotation);
  w.in_base = b.reg(), w.out_base = b.reg();
  b.emit(Opcode::LA, {w.in_base.index, in_sym});
  if (in.storage_offset) b.addi(w.in_base, w.in_base, in.storage_offset * e);
  b.emit(Opcode::LA, {w.out_base.index, out_sym});
  if (out.storage_offset) b.addi(w.out_base, w.out_base, out.storage_offset * e);
  return w;
}

// The copy of [.., z, .., m, .., a] (input runs [m][a], output runs [m][z]) as tiles of all of z, mb of
// m and all of a; nullopt where no block of m gives runs of a request on both sides in the scratchpad.
std::optional<Kernel> three_dim_transpose(const TensorDesc& in, const TensorDesc& out, const std::vector<Dim>& dims, int64_t a, int64_t m,
                                          int64_t z, const sim::ChipConfig& config) {
  const int64_t e = isa::dtype_size_bytes(out.dtype), request = config.core.dma.request_bytes;
  const int64_t scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  const int64_t na = dims[size_t(a)].size, nz = dims[size_t(z)].size, nm = dims[size_t(m)].size;
  int64_t elements = 1;
  for (const Dim& dim : dims) elements *= dim.size;
  // The largest block of m whose tile (two input slots, the planes turned over, two output slots) fits
  // in tiles of up to 256 KiB, while every core keeps two tiles (one, on large's 16 cores, left the
  // load and the store of a core's only tile one after the other: 64% of the roofline against 69%);
  // its runs a request or more on both sides.
  std::vector<int64_t> blocks;
  for (int64_t n = 1; n <= nm; ++n) {
    const int64_t bytes = align64(nz * n * na * e);
    if (nm % n == 0 && n * std::min(na, nz) * e >= request && 5 * bytes <= scratchpad && bytes <= 256 * 1024) blocks.push_back(n);
  }
  if (blocks.empty()) return std::nullopt;
  const int64_t most_tiles = elements / (nz * na * blocks.front());
  int64_t mb = blocks.front();
  for (const int64_t n : blocks)
    if (elements / (nz * na * n) >= std::min<int64_t>(2 * int64_t{config.num_cores}, most_tiles)) mb = n;
  const int64_t tile_bytes = align64(nz * mb * na * e);
  const TileLoop loop_of = tile_loop(dims, [&](int64_t d) { return d == a ? na : d == z ? nz : d == m ? mb : 1; });
  const int64_t tiles = loop_of.tiles;
  const unsigned cores = static_cast<unsigned>(std::min<int64_t>(config.num_cores, tiles));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);
  // Local: two input slots [z][mb][a], the planes turned over [z][a][mb] (the vector unit's alone), two
  // output slots [a][mb][z].
  const int64_t in0 = 0, mid = 2 * tile_bytes, out0 = 3 * tile_bytes;
  const int64_t dt = static_cast<int64_t>(out.dtype);

  ProgramBuilder b("copy, three-dim transposes (generated)");
  constexpr int64_t IN_FULL = 0, IN_FREE = 1, OUT_FULL = 2, OUT_FREE = 3;
  const int64_t kDma0 = 1, kVec = 6, kStore = 1 + store_channel;
  const TileWalk w = begin_tile_walk(b, in, out, tiles, e);
  const Reg t = w.t, t_end = w.t_end, t_first = w.t_first, rotation = w.rotation, u = w.u, in_base = w.in_base, out_base = w.out_base;
  const Label done = w.done;
  for (int i = 0; i < 2; ++i) b.emit(Opcode::SIGNAL, {kDma0, IN_FREE}), b.emit(Opcode::SIGNAL, {kVec, OUT_FREE});
  const Reg slot = b.reg(), addr = b.reg(), local = b.reg(), tmp = b.reg(), rows = b.reg(), cols = b.reg(), count = b.reg();
  const CopyDma dma{b.reg(), b.reg(), b.reg(), b.reg(), b.reg(), b.reg(), b.reg()};
  b.li(slot, 0);
  const Label loop = b.label();
  b.bind(loop);
  b.visited_item(u, t, t_first, t_end, rotation);
  // Load: nz runs of mb x na elements, z's stride apart, into [z][mb][a].
  b.emit(Opcode::WAIT, {kDma0, IN_FREE});
  b.tile_address(addr, in_base, u, loop_of.dims, loop_of.in_strides, {}, e, tmp);
  b.addi(local, slot, in0);
  dma.emit(b, Opcode::DMA_LD, 0, local, addr, DmaDims{mb * na, {nz, dims[size_t(z)].in_stride, mb * na}, {}}, e);
  b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});
  // Each [mb][a] plane into [a][mb], then [z][(a mb)] into [(a mb)][z].
  b.emit(Opcode::WAIT, {kVec, IN_FULL});
  b.emit(Opcode::WAIT, {kVec, OUT_FREE});
  b.addi(addr, slot, in0), b.li(local, mid), b.li(rows, mb), b.li(cols, na), b.li(count, nz);
  const Label plane = b.label();
  b.bind(plane);
  b.emit(Opcode::V_TRANS, {dt, local.index, addr.index, rows.index, cols.index});
  b.addi(addr, addr, mb * na * e), b.addi(local, local, mb * na * e);
  b.branch(Opcode::DBNZ, {count.index}, plane);
  b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
  b.li(addr, mid), b.addi(local, slot, out0), b.li(rows, nz), b.li(cols, na * mb);
  b.emit(Opcode::V_TRANS, {dt, local.index, addr.index, rows.index, cols.index});
  b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
  // Store: na runs of mb x nz elements, a's stride apart, from [a][mb][z].
  b.emit(Opcode::WAIT, {kStore, OUT_FULL});
  b.tile_address(addr, out_base, u, loop_of.dims, loop_of.out_strides, {}, e, tmp);
  b.addi(local, slot, out0);
  dma.emit(b, Opcode::DMA_ST, store_channel, local, addr, DmaDims{mb * nz, {na, dims[size_t(a)].out_stride, mb * nz}, {}}, e);
  b.emit(Opcode::SIGNAL, {kStore, OUT_FREE});
  b.emit(Opcode::XORI, {slot.index, slot.index, tile_bytes});
  b.addi(t, t, 1);
  b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = std::max(1u, cores);
  std::ostringstream plan;
  plan << "copy: " << out.to_string() << " from " << in.to_string() << " as three-dim transposes: tiles of " << nz << " x " << mb << " x " << na
       << " turned into " << na << " x " << mb << " x " << nz << " (v.trans of each " << mb << " x " << na << " plane, then of " << nz << " x "
       << na * mb << "), read in runs of " << mb * na * e << " bytes, written in runs of " << mb * nz * e << " bytes; " << tiles << " tiles over "
       << kernel.cores << " cores; " << 5 * tile_bytes << " bytes of scratchpad; loads on dma ch0, stores on dma ch" << store_channel << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace

std::optional<Kernel> lower_transpose_copy(const OpDesc& op, const sim::ChipConfig& config) {
  if (op.kind != OpKind::COPY || op.inputs.size() != 1 || op.inputs[0].dtype != op.output.dtype) return std::nullopt;
  const TensorDesc& in = op.inputs[0];
  const TensorDesc& out = op.output;
  if (in.shape != out.shape || out.numel() == 0) return std::nullopt;
  for (int64_t d = int64_t(out.shape.size()) - 1, dense = 1; d >= 0; dense *= out.shape[size_t(d)], --d)
    if (out.shape[size_t(d)] != 1 && out.strides[size_t(d)] != dense) return std::nullopt;  // a dense output only
  for (const int64_t s : in.strides)
    if (s < 0) return std::nullopt;
  const int64_t dtype_bytes = isa::dtype_size_bytes(out.dtype);
  int64_t e = dtype_bytes;  // the bytes of an element moved: a dtype's, or a folded run's (below)

  // The dims in the output's order, size-1 dims dropped, neighbours merged where both tensors allow.
  std::vector<Dim> dims;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (out.shape[d] == 1) continue;
    const Dim next{out.shape[d], in.strides[d], out.strides[d]};
    if (!dims.empty() && dims.back().in_stride == next.size * next.in_stride && dims.back().out_stride == next.size * next.out_stride) {
      dims.back() = {dims.back().size * next.size, next.in_stride, next.out_stride};
    } else {
      dims.push_back(next);
    }
  }
  // A run both sides share that is too short for a DMA request of its own (a pixel shuffle's, or a
  // 2 x 2 / 2 transposed convolution's, 2 bf16 of kw) moves as one element of its width, 2 or 4
  // bytes, and the transpose is between the dims around it. (No dtype is 8 bytes wide: 2 f32 stay.)
  // A longer shared run that is still shorter than a request (permute(2, 1, 0, 3) of [16, 32, 64, 64]
  // bf16: 128 bytes) moves as a piece of its own, and the store's DMA puts the pieces in the output's
  // order (its runs one piece long, but a tile's pieces of an output run adjacent in DRAM): no v.trans.
  const int64_t request = config.core.dma.request_bytes;
  isa::DType moved = out.dtype;
  bool folded = false, pieces = false;
  if (dims.size() >= 2 && dims.back().in_stride == 1) {
    const int64_t n = dims.back().size, wide = n * e;
    bool divides = true;
    for (size_t d = 0; d + 1 < dims.size(); ++d) divides = divides && dims[d].in_stride % n == 0 && dims[d].out_stride % n == 0;
    if (n > 1 && divides && (wide == 2 || wide == 4 || wide < request)) {
      dims.pop_back();
      for (Dim& dim : dims) dim.in_stride /= n, dim.out_stride /= n;
      folded = wide == 2 || wide == 4, pieces = !folded;
      e = wide, moved = wide == 4 ? isa::DType::I32 : isa::DType::F16;
    }
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  const auto find_in_stride = [&](int64_t stride) {
    for (int64_t d = 0; d < rank; ++d)
      if (dims[size_t(d)].in_stride == stride) return d;
    return int64_t{-1};
  };
  const int64_t z = rank - 1, a = find_in_stride(1);
  if (rank < 2 || a < 0 || a == z) return std::nullopt;  // no transpose: the elementwise kernel's runs are long already
  // Both runs short and continued by the same dim: only a tile of three dims has long runs on both sides.
  if (!pieces && !folded && z - 1 != a && find_in_stride(dims[size_t(a)].size) == z - 1 && dims[size_t(a)].size * e < request &&
      dims[size_t(z)].size * e < request)
    return three_dim_transpose(in, out, dims, a, z - 1, z, config);

  // Runs of a whole period of the DRAM interleave on both sides where the tiles fit (each run then
  // reaches every channel, whatever the strides between runs: runs of 512 bytes of a 4096 x 4096 f32
  // transpose, 16 KiB apart, all fell on two channels of base's four), else the shorter side shorter.
  int64_t z2 = -1, a2 = -1, qz = 0, qz2 = 1, pa = 0, pa2 = 1;
  const int64_t period = int64_t{config.dram.channels} * config.dram.interleave_bytes, scratchpad = static_cast<int64_t>(config.core.scratchpad.size_bytes);
  // Runs shorter than a DMA request on either side: the elementwise kernel's tiles do as well.
  for (int64_t want_q = std::max<int64_t>(period, 2 * request), want_p = want_q;; (want_q >= want_p ? want_q : want_p) /= 2) {
    if (want_q < request && want_p < request) return std::nullopt;
    // Q: part of z, or all of z and part of z2 (z - 1, unless that is a, or the dim that continues a in
    // the input while a alone is shorter than a request: P needs that one more. On large, whose period
    // is 4 KiB, permute(3, 2, 0, 1) of 16 x 32 x 64 x 64 otherwise read runs of 128 bytes).
    const int64_t a_next = find_in_stride(dims[size_t(a)].size);
    const bool a_short = dims[size_t(a)].size * e < request;
    z2 = -1, qz2 = 1, qz = block_of(dims[size_t(z)].size, e, want_q);
    if (qz == dims[size_t(z)].size && qz * e < want_q && z - 1 != a && !(a_short && z - 1 == a_next) && !pieces)
      z2 = z - 1, qz2 = block_of(dims[size_t(z2)].size, qz * e, want_q);
    // P: part of a, or all of a and part of a2 (the dim at a's size in the input, if it is not in Q).
    a2 = -1, pa2 = 1, pa = block_of(dims[size_t(a)].size, e, want_p);
    if (pa == dims[size_t(a)].size && pa * e < want_p && !pieces) {
      if (a_next >= 0 && a_next != z && a_next != z2) a2 = a_next, pa2 = block_of(dims[size_t(a2)].size, pa * e, want_p);
    }
    // Two slots of an input tile and an output tile.
    if (qz > 0 && qz2 > 0 && pa > 0 && pa2 > 0 && 4 * align64(pa * pa2 * qz * qz2 * e) <= scratchpad) break;
  }
  // Small tiles grow along a dim they take part of (P's continuation first: longer reads), up to
  // kTileBytes, while every core keeps a tile: a DMA's latency is exposed once per transfer.
  int64_t elements = 1;
  for (const Dim& dim : dims) elements *= dim.size;
  const int64_t min_tiles = std::min<int64_t>(config.num_cores, elements / (pa * pa2 * qz * qz2));
  for (const auto& [block, dim] : {std::pair{&pa2, a2}, std::pair{&qz2, z2}, std::pair{&pa, a2 < 0 ? a : -1}, std::pair{&qz, z2 < 0 ? z : -1}}) {
    if (dim < 0) continue;
    const int64_t others = pa * pa2 * qz * qz2 / *block, size = dims[size_t(dim)].size;
    for (int64_t n = *block + 1; n <= size; ++n)
      if (size % n == 0 && align64(n * others * e) <= std::min(kTileBytes, scratchpad / 4) && elements / (n * others) >= min_tiles) *block = n;
  }
  const int64_t p_elems = pa * pa2, q_elems = qz * qz2;
  const int64_t tile_bytes = align64(p_elems * q_elems * e);
  const Dim none{1, 0, 0};
  const Dim& dz = dims[size_t(z)];
  const Dim& dz2 = z2 >= 0 ? dims[size_t(z2)] : none;
  const Dim& da = dims[size_t(a)];
  const Dim& da2 = a2 >= 0 ? dims[size_t(a2)] : none;
  // Load: Q runs of P elements, [Q][P] here with q = z2 * qz + z. Store: P runs of Q, p = a2 * pa + a
  // (with pieces: from the loaded [Q][P], a piece at a time, the Q pieces of an output run adjacent).
  DmaDims load = arranged({p_elems, {qz, dz.in_stride, p_elems}, {qz2, dz2.in_stride, qz * p_elems}});
  DmaDims store = pieces ? arranged({1, {qz, dz.out_stride, p_elems}, {pa, da.out_stride, 1}})
                         : arranged({q_elems, {pa, da.out_stride, q_elems}, {pa2, da2.out_stride, pa * q_elems}});
  // (A folded run's other choice is the elementwise kernel's runs of that run: any longer is better.)
  if (pieces ? load.run * e < request || q_elems * e < request / 2 : std::min(load.run, store.run) * e < (folded ? request / 2 : request))
    return std::nullopt;
  // Small tiles take a batch of nb of another dim (c, the output's innermost left), as the DMAs' outer
  // dim where both have it free: a DMA's latency is exposed once per transfer.
  int64_t c = -1, nb = 1;
  if (load.outer.count == 1 && store.outer.count == 1 && !pieces)
    for (int64_t d = rank - 1; d >= 0 && c < 0; --d)
      if (d != a && d != a2 && d != z && d != z2) c = d;
  if (c >= 0) {
    for (int64_t n = 1; n <= dims[size_t(c)].size; ++n)
      if (dims[size_t(c)].size % n == 0 && n * tile_bytes <= kTileBytes && 4 * n * tile_bytes <= scratchpad &&
          elements / (n * p_elems * q_elems) >= min_tiles)
        nb = n;
    load.outer = {nb, dims[size_t(c)].in_stride, tile_bytes / e}, store.outer = {nb, dims[size_t(c)].out_stride, tile_bytes / e};
    load = arranged(load), store = arranged(store);
  }
  const int64_t slot_bytes = (pieces ? 1 : 2) * nb * tile_bytes;  // nb input tiles, then nb output tiles (none with pieces)

  const TileLoop loop_of = tile_loop(dims, [&](int64_t d) { return d == a ? pa : d == a2 ? pa2 : d == z ? qz : d == z2 ? qz2 : d == c ? nb : 1; });
  const int64_t tiles = loop_of.tiles;
  const unsigned cores = static_cast<unsigned>(std::min<int64_t>(config.num_cores, tiles));
  const unsigned store_channel = std::min<unsigned>(2, config.core.dma.channels - 1);
  // Pieces are stored a request each: half of P's on a fourth DMA channel, where there is one, doubles
  // the requests a cycle (the OUT_* semaphores, which pieces leave free, pass its half).
  const bool split_store = pieces && config.core.dma.channels >= 4 && pa >= 2;
  const int64_t first_half = split_store ? pa / 2 : pa;
  const auto pieces_store = [&](int64_t count) { return arranged({1, {qz, dz.out_stride, p_elems}, {count, da.out_stride, 1}}); };

  ProgramBuilder b("copy, blocked transposes (generated)");
  constexpr int64_t IN_FULL = 0, IN_FREE = 1, OUT_FULL = 2, OUT_FREE = 3;
  const int64_t kDma0 = 1, kVec = 6, kStore = 1 + store_channel, kStore2 = 4;
  const TileWalk w = begin_tile_walk(b, in, out, tiles, dtype_bytes);
  const Reg t = w.t, t_end = w.t_end, t_first = w.t_first, rotation = w.rotation, u = w.u, in_base = w.in_base, out_base = w.out_base;
  const Label done = w.done;
  for (int i = 0; i < 2; ++i) {
    b.emit(Opcode::SIGNAL, {kDma0, IN_FREE});
    if (!pieces || split_store) b.emit(Opcode::SIGNAL, {kVec, OUT_FREE});
  }
  const Reg slot = b.reg(), addr = b.reg(), local = b.reg(), tmp = b.reg(), rows = b.reg(), cols = b.reg();
  const CopyDma copy_dma{b.reg(), b.reg(), b.reg(), b.reg(), b.reg(), b.reg(), b.reg()};
  b.li(slot, 0);
  const auto dma = [&](Opcode opcode, int64_t channel, const DmaDims& shape) { copy_dma.emit(b, opcode, channel, local, addr, shape, e); };
  const Label loop = b.label();
  b.bind(loop);
  b.emit(Opcode::WAIT, {kDma0, IN_FREE});
  if (split_store) b.emit(Opcode::WAIT, {kDma0, OUT_FREE});
  b.visited_item(u, t, t_first, t_end, rotation);
  b.tile_address(addr, in_base, u, loop_of.dims, loop_of.in_strides, {}, e, tmp);
  b.mov(local, slot);
  dma(Opcode::DMA_LD, 0, load);
  b.emit(Opcode::SIGNAL, {kDma0, IN_FULL});
  if (split_store) b.emit(Opcode::SIGNAL, {kDma0, OUT_FULL});
  // The tile turned over into [P][Q] (with pieces, the store's DMA reorders them from [Q][P] itself).
  const int64_t STORE_FULL = pieces ? IN_FULL : OUT_FULL, STORE_FREE = pieces ? IN_FREE : OUT_FREE;
  if (!pieces) {
    b.emit(Opcode::WAIT, {kVec, IN_FULL});
    b.emit(Opcode::WAIT, {kVec, OUT_FREE});
    b.addi(local, slot, nb * tile_bytes), b.li(rows, q_elems), b.li(cols, p_elems), b.mov(addr, slot), b.li(tmp, nb);
    const Label batch = b.label();
    b.bind(batch);
    b.emit(Opcode::V_TRANS, {static_cast<int64_t>(moved), local.index, addr.index, rows.index, cols.index});
    b.addi(local, local, tile_bytes), b.addi(addr, addr, tile_bytes);
    b.branch(Opcode::DBNZ, {tmp.index}, batch);
    b.emit(Opcode::SIGNAL, {kVec, IN_FREE});
    b.emit(Opcode::SIGNAL, {kVec, OUT_FULL});
  }
  b.emit(Opcode::WAIT, {kStore, STORE_FULL});
  b.tile_address(addr, out_base, u, loop_of.dims, loop_of.out_strides, {}, e, tmp);
  b.addi(local, slot, pieces ? 0 : nb * tile_bytes);
  dma(Opcode::DMA_ST, store_channel, pieces ? pieces_store(first_half) : store);
  b.emit(Opcode::SIGNAL, {kStore, STORE_FREE});
  if (split_store) {  // P's second half
    b.emit(Opcode::WAIT, {kStore2, OUT_FULL});
    b.li(tmp, first_half * da.out_stride * e), b.add(addr, addr, tmp), b.addi(local, slot, first_half * e);
    dma(Opcode::DMA_ST, 3, pieces_store(pa - first_half));
    b.emit(Opcode::SIGNAL, {kStore2, OUT_FREE});
  }
  b.emit(Opcode::XORI, {slot.index, slot.index, slot_bytes});
  b.addi(t, t, 1);
  b.branch(Opcode::BLT, {t.index, t_end.index}, loop);
  b.bind(done);
  b.emit(Opcode::HALT, {});

  Kernel kernel;
  kernel.program = b.finish();
  kernel.cores = std::max(1u, cores);
  std::ostringstream plan;
  plan << "copy: " << out.to_string() << " from " << in.to_string() << " as blocked transposes: tiles of " << (nb > 1 ? std::to_string(nb) + " x " : "") << q_elems << " x " << p_elems
       << (pieces ? " pieces of " + std::to_string(e) + " bytes (the run both sides share) reordered by the store's DMA into "
                  : " turned into ")
       << p_elems << " x " << q_elems << ", read in runs of " << load.run * e << " bytes, written "
       << (pieces ? "a piece at a time, " + std::to_string(q_elems) + " adjacent (" + std::to_string(q_elems * e) + " bytes)" : "in runs of " + std::to_string(store.run * e) + " bytes")
       << (folded ? " (elements of " + std::to_string(e) + " bytes: the run both sides share)" : "") << "; " << tiles << " tiles over " << kernel.cores << " cores; " << 2 * slot_bytes
       << " bytes of scratchpad (two slots); loads on dma ch0, stores on dma ch" << store_channel << (split_store ? " and ch3" : "") << "\n";
  kernel.plan = plan.str();
  return kernel;
}

}  // namespace npu::compiler
