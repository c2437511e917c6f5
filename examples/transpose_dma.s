# transpose_dma.s -- y = transpose(x) with the DMA engines only.
#
# x is R x C, y is C x R (f32). The matrix is cut into TR x TC tiles. Each tile
# is loaded with whole rows (TR rows of TC*4 contiguous bytes) and stored
# transposed by a 3-D dma.st whose rows are single elements:
#     plane p < TC (tile column), row r < TR (tile row), n0 = 4 bytes
#     src = buf + p*4      + r*(TC*4)      local tile element (r, p)
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
# Work split: `.code all`; core c takes tile rows c, c + ncores, c + 2*ncores,
# ... (no divide instruction, so tiles are dealt out by tile row); a core with
# no tile row left just halts. Within a core, tiles go through a ring of NBUF
# tile buffers:
#     dma0: wait FREE, load tile -> slot, signal FULL
#     dma1: wait FULL, store slot transposed, signal FREE       (FREE starts at NBUF)
# so the load of tile t+1 overlaps the store of tile t.
#
# Assumptions: R divisible by TR, C divisible by TC; scratchpad >= NBUF*TR*TC*4
# bytes (32 KiB with the defaults).

.equ R, 320
.equ C, 192
.equ TR, 64
.equ TC, 64
.equ NBUF, 2
.equ NTR, R / TR                # tile rows
.equ NTC, C / TC                # tile columns
.equ TILE_BYTES, TR * TC * 4
.equ SLOT_BYTES, (TILE_BYTES + 63) / 64 * 64

.input  x, f32, R, C
.output y, f32, C, R

.local TBUF, f32, 0, NBUF * SLOT_BYTES / 4

.sem FULL, s0
.sem FREE, s1

.reg t0,       r1
.reg tr_idx,   r2               # tile row handled by this core
.reg tr_step,  r3               # ncores
.reg ntr,      r4
.reg x_row,    r5               # global: x[tr_idx*TR, 0]
.reg x_row_step, r6             # ncores tile rows of x: ncores*TR*C*4
.reg y_col,    r7               # global: y[0, tr_idx*TR]
.reg y_col_step, r8             # ncores*TR*4
.reg x_src,    r9
.reg y_dst,    r10
.reg buf,      r11
.reg buf_end,  r12
.reg slot,     r13
.reg ld_n0,    r14              # TC*4: tile row in bytes, also local row stride and x column step
.reg x_gs,     r15              # C*4: x row stride
.reg tr,       r16
.reg tc_n,     r17
.reg elem,     r18              # 4
.reg y_gs,     r19              # R*4: y row stride
.reg y_step,   r20              # TC*R*4: next tile column of x = next TC rows of y
.reg c_left,   r21

.code all
        li      c_left, NBUF
prime:  sync.signal ctl, FREE
        dbnz    c_left, prime

        csrr    tr_idx, coreid
        csrr    tr_step, ncores
        li      ntr, NTR
        la      x_row, x
        muli    t0, tr_idx, TR * C * 4
        add     x_row, x_row, t0
        muli    x_row_step, tr_step, TR * C * 4
        la      y_col, y
        muli    t0, tr_idx, TR * 4
        add     y_col, y_col, t0
        muli    y_col_step, tr_step, TR * 4

        li      buf, TBUF
        li      buf_end, TBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      ld_n0, TC * 4
        li      x_gs, C * 4
        li      tr, TR
        li      tc_n, TC
        li      elem, 4
        li      y_gs, R * 4
        li      y_step, TC * R * 4

tile_row:
        bge     tr_idx, ntr, done
        mov     x_src, x_row
        mov     y_dst, y_col
        li      c_left, NTC
tile:
        sync.wait   dma0, FREE
        dma.ld      ch0, buf, x_src, ld_n0, tr, zero, ld_n0, x_gs, zero, zero
        sync.signal dma0, FULL
        sync.wait   dma1, FULL
        #           ch   dst    src  n0    n1  n2    dst_s1 src_s1 dst_s2 src_s2
        dma.st      ch1, y_dst, buf, elem, tr, tc_n, elem,  ld_n0, y_gs,  elem
        sync.signal dma1, FREE

        add     x_src, x_src, ld_n0
        add     y_dst, y_dst, y_step
        add     buf, buf, slot
        bne     buf, buf_end, same_lap
        li      buf, TBUF
same_lap:
        dbnz    c_left, tile

        add     tr_idx, tr_idx, tr_step
        add     x_row, x_row, x_row_step
        add     y_col, y_col, y_col_step
        jmp     tile_row
done:
        halt
