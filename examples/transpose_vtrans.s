# transpose_vtrans.s -- y = transpose(x), transposing tiles in the vector unit.
#
# Same problem and work split as transpose_dma.s (x is R x C, y is C x R, f32,
# TR x TC tiles, core c takes tile rows c, c + ncores, ...), but every DMA row
# is long: the tile is loaded as TR rows of TC*4 bytes, `v.trans` turns it into
# a dense TC x TR tile, and that is stored as TC rows of TR*4 bytes (y row
# stride R*4). Cost per tile: TR + TC DMA bursts instead of TR + TR*TC with the
# element-wise store of transpose_dma.s, plus one vector pass over the tile.
#
# Two rings of NBUF tile buffers, each with a FULL and a FREE semaphore
# (FREE starts at NBUF):
#     dma0: wait IN_FREE,  load tile -> IN slot,           signal IN_FULL
#     vec : wait IN_FULL,  wait OUT_FREE, v.trans IN -> OUT, signal IN_FREE, OUT_FULL
#     dma1: wait OUT_FULL, store OUT slot,                  signal OUT_FREE
# so loading tile t+1, transposing tile t and storing tile t-1 overlap.
#
# Assumptions: R divisible by TR, C divisible by TC; scratchpad >=
# 2*NBUF*TR*TC*4 bytes (64 KiB with the defaults).

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

.local IBUF, f32, 0,                        NBUF * SLOT_BYTES / 4   # TR x TC tiles
.local OBUF, f32, IBUF + NBUF * SLOT_BYTES, NBUF * SLOT_BYTES / 4   # TC x TR tiles

.sem IN_FULL,  s0
.sem IN_FREE,  s1
.sem OUT_FULL, s2
.sem OUT_FREE, s3

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
.reg ibuf,     r11
.reg obuf,     r12
.reg slot,     r13
.reg ld_n0,    r14              # TC*4: tile row in bytes, also local row stride and x column step
.reg x_gs,     r15              # C*4: x row stride
.reg tr,       r16
.reg tc_n,     r17
.reg st_n0,    r18              # TR*4: row of a transposed tile, also its local row stride
.reg y_gs,     r19              # R*4: y row stride
.reg y_step,   r20              # TC*R*4: next tile column of x = next TC rows of y
.reg c_left,   r21
.reg ibuf_end, r22

.code all
        li      c_left, NBUF
prime:  sync.signal ctl, IN_FREE
        sync.signal ctl, OUT_FREE
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

        li      ibuf, IBUF
        li      obuf, OBUF
        li      ibuf_end, IBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      ld_n0, TC * 4
        li      x_gs, C * 4
        li      tr, TR
        li      tc_n, TC
        li      st_n0, TR * 4
        li      y_gs, R * 4
        li      y_step, TC * R * 4

tile_row:
        bge     tr_idx, ntr, done
        mov     x_src, x_row
        mov     y_dst, y_col
        li      c_left, NTC
tile:
        sync.wait   dma0, IN_FREE
        dma.ld      ch0, ibuf, x_src, ld_n0, tr, zero, ld_n0, x_gs, zero, zero
        sync.signal dma0, IN_FULL

        sync.wait   vec, IN_FULL
        sync.wait   vec, OUT_FREE
        v.trans     f32, obuf, ibuf, tr, tc_n
        sync.signal vec, IN_FREE
        sync.signal vec, OUT_FULL

        sync.wait   dma1, OUT_FULL
        dma.st      ch1, y_dst, obuf, st_n0, tc_n, zero, y_gs, st_n0, zero, zero
        sync.signal dma1, OUT_FREE

        add     x_src, x_src, ld_n0
        add     y_dst, y_dst, y_step
        add     ibuf, ibuf, slot        # both rings advance together
        add     obuf, obuf, slot
        bne     ibuf, ibuf_end, same_lap
        li      ibuf, IBUF
        li      obuf, OBUF
same_lap:
        dbnz    c_left, tile

        add     tr_idx, tr_idx, tr_step
        add     x_row, x_row, x_row_step
        add     y_col, y_col, y_col_step
        jmp     tile_row
done:
        halt
