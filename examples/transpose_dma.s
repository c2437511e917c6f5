# transpose_dma.s -- y = transpose(x) with the DMA engines only.
#
# x is R x C, y is C x R (f32). The matrix is cut into tiles of (up to) TR x TC
# elements. A tr x tc tile is loaded with whole rows (tr rows of tc*4
# contiguous bytes) and stored transposed by a 3-D dma.st whose rows are single
# elements:
#     plane p < tc (tile column), row r < tr (tile row), n0 = 4 bytes
#     src = buf + p*4      + r*(tc*4)      local tile element (r, p)
#     dst = y_tile + p*(R*4) + r*4         y[j0 + p][i0 + r]
#
# Cost: the load is TR bursts of TC*4 bytes, but the store is TR*TC rows of 4
# bytes: one DMA row per element. On an engine that charges a fixed cost per
# row (descriptor, DRAM burst) the store dominates, about TC times the cost of
# the load. The TR elements of one plane do land contiguously in y, so an
# engine that merges adjacent rows would recover full bursts; otherwise see
# transpose_vtrans.s, which transposes in the vector unit and keeps both DMAs
# row-contiguous. (A single `dma.gg` with n0 = 4, n1 = R, n2 = C transposes the
# whole matrix DRAM to DRAM in one instruction, but then the reads are 4-byte
# accesses as well.)
#
# Tiling: x is cut into NTR = ceil(R/TR) by NTC = ceil(C/TC) tiles, numbered
# row-major; tile t starts at row i0 = (t / NTC)*TR and column j0 = (t % NTC)*TC
# and is tr = min(TR, R - i0) by tc = min(TC, C - j0) elements, so the last tile
# row and column may be short. The local tile is dense (row stride tc*4), and
# both DMAs use the tile's actual tr and tc: no padding, no masking.
#
# Work split: `.code all`; with T = NTR*NTC tiles and P = ncores, core c takes
# the tiles [c*T/P, (c+1)*T/P) (integer division: counts differ by at most
# one); a core with no tiles just halts. Within a core, tiles go through a ring
# of NBUF tile buffers:
#     dma0: wait FREE, load tile -> slot, signal FULL
#     dma1: wait FULL, store slot transposed, signal FREE       (FREE starts at NBUF)
# so the load of tile t+1 overlaps the store of tile t. ctl only queues work
# (each tile's shape is in registers, read by the engines at dispatch); every
# wait is matched by a signal queued before it or by an initial token.
#
# Assumptions: scratchpad >= NBUF*TR*TC*4 bytes (32 KiB with the defaults).

.equ R, 320
.equ C, 192
.equ TR, 64
.equ TC, 64
.equ NBUF, 2
.equ NTR, (R + TR - 1) / TR     # tile rows
.equ NTC, (C + TC - 1) / TC     # tile columns
.equ NTILES, NTR * NTC
.equ TILE_BYTES, TR * TC * 4
.equ SLOT_BYTES, (TILE_BYTES + 63) / 64 * 64

.input  x, f32, R, C
.output y, f32, C, R

.local TBUF, f32, 0, NBUF * SLOT_BYTES / 4

.sem FULL, s0
.sem FREE, s1

.reg t0,       r1
.reg t1,       r2
.reg i0,       r3               # first row of the current tile (of x)
.reg j0,       r4               # first column of the current tile (of x)
.reg n_left,   r5               # tiles left for this core
.reg x_base,   r6
.reg y_base,   r7
.reg x_src,    r8               # global: x[i0, j0]
.reg y_dst,    r9               # global: y[j0, i0]
.reg buf,      r10
.reg buf_end,  r11
.reg slot,     r12
.reg tr,       r13              # rows of the current tile
.reg tc_n,     r14              # columns of the current tile
.reg ld_n0,    r15              # tc*4: tile row in bytes, also the local row stride
.reg x_gs,     r16              # C*4: x row stride
.reg elem,     r17              # 4
.reg y_gs,     r18              # R*4: y row stride
.reg lim,      r19

.code all
        li      n_left, NBUF
prime:  sync.signal ctl, FREE
        dbnz    n_left, prime

        # This core's tiles: [first, last) = [c*T/P, (c+1)*T/P).
        csrr    t0, coreid
        csrr    t1, ncores
        li      lim, NTILES
        mul     n_left, t0, lim
        divu    n_left, n_left, t1      # first
        addi    t0, t0, 1
        mul     t0, t0, lim
        divu    t0, t0, t1              # last
        li      lim, NTC
        remu    j0, n_left, lim         # first tile's column and row
        divu    i0, n_left, lim
        sub     n_left, t0, n_left
        beq     n_left, zero, done
        muli    i0, i0, TR
        muli    j0, j0, TC

        la      x_base, x
        la      y_base, y
        li      buf, TBUF
        li      buf_end, TBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      x_gs, C * 4
        li      elem, 4
        li      y_gs, R * 4

tile:
        # tr = min(TR, R - i0), tc = min(TC, C - j0)
        li      lim, R
        sub     tr, lim, i0
        li      lim, TR
        min     tr, tr, lim
        li      lim, C
        sub     tc_n, lim, j0
        li      lim, TC
        min     tc_n, tc_n, lim
        shli    ld_n0, tc_n, 2
        # x_src = x + (i0*C + j0)*4, y_dst = y + (j0*R + i0)*4
        muli    t0, i0, C * 4
        shli    t1, j0, 2
        add     x_src, x_base, t0
        add     x_src, x_src, t1
        muli    t0, j0, R * 4
        shli    t1, i0, 2
        add     y_dst, y_base, t0
        add     y_dst, y_dst, t1

        sync.wait   dma0, FREE
        dma.ld      ch0, buf, x_src, ld_n0, tr, zero, ld_n0, x_gs, zero, zero
        sync.signal dma0, FULL
        sync.wait   dma1, FULL
        #           ch   dst    src  n0    n1  n2    dst_s1 src_s1 dst_s2 src_s2
        dma.st      ch1, y_dst, buf, elem, tr, tc_n, elem,  ld_n0, y_gs,  elem
        sync.signal dma1, FREE

        add     buf, buf, slot
        bne     buf, buf_end, same_lap
        li      buf, TBUF
same_lap:
        # Next tile in row-major order: j0 += TC, wrapping to the next tile row.
        addi    j0, j0, TC
        li      lim, C
        blt     j0, lim, same_row
        li      j0, 0
        addi    i0, i0, TR
same_row:
        dbnz    n_left, tile
done:
        halt
