# transpose_vtrans.s -- y = transpose(x), transposing tiles in the vector unit.
#
# Same problem, tiling and work split as transpose_dma.s (x is R x C, y is
# C x R, f32; tiles of up to TR x TC numbered row-major, the last tile row and
# column short: tr = min(TR, R - i0), tc = min(TC, C - j0); core c of P takes
# tiles [c*T/P, (c+1)*T/P) of the T tiles and halts at once if that is empty),
# but every DMA row is long: the tile is loaded as tr rows of tc*4 bytes,
# `v.trans` turns it into a dense tc x tr tile, and that is stored as tc rows
# of tr*4 bytes (y row stride R*4). Cost per tile: tr + tc DMA bursts instead
# of tr + tr*tc with the element-wise store of transpose_dma.s, plus one vector
# pass over the tile.
#
# Two rings of NBUF tile buffers, each with a FULL and a FREE semaphore
# (FREE starts at NBUF):
#     dma0: wait IN_FREE,  load tile -> IN slot,           signal IN_FULL
#     vec : wait IN_FULL,  wait OUT_FREE, v.trans IN -> OUT, signal IN_FREE, OUT_FULL
#     dma1: wait OUT_FULL, store OUT slot,                  signal OUT_FREE
# so loading tile t+1, transposing tile t and storing tile t-1 overlap. ctl
# only queues work (each tile's shape is in registers, read at dispatch).
#
# Assumptions: scratchpad >= 2*NBUF*TR*TC*4 bytes (64 KiB with the defaults).

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

.local IBUF, f32, 0,                        NBUF * SLOT_BYTES / 4   # tr x tc tiles
.local OBUF, f32, IBUF + NBUF * SLOT_BYTES, NBUF * SLOT_BYTES / 4   # tc x tr tiles

.sem IN_FULL,  s0
.sem IN_FREE,  s1
.sem OUT_FULL, s2
.sem OUT_FREE, s3

.reg t0,       r1
.reg t1,       r2
.reg i0,       r3               # first row of the current tile (of x)
.reg j0,       r4               # first column of the current tile (of x)
.reg n_left,   r5               # tiles left for this core
.reg x_base,   r6
.reg y_base,   r7
.reg x_src,    r8               # global: x[i0, j0]
.reg y_dst,    r9               # global: y[j0, i0]
.reg ibuf,     r10
.reg obuf,     r11
.reg ibuf_end, r12
.reg slot,     r13
.reg tr,       r14              # rows of the current tile
.reg tc_n,     r15              # columns of the current tile
.reg ld_n0,    r16              # tc*4: tile row in bytes, also the local row stride
.reg st_n0,    r17              # tr*4: row of the transposed tile, also its local row stride
.reg x_gs,     r18              # C*4: x row stride
.reg y_gs,     r19              # R*4: y row stride
.reg lim,      r20

.code all
        li      n_left, NBUF
prime:  sync.signal ctl, IN_FREE
        sync.signal ctl, OUT_FREE
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
        li      ibuf, IBUF
        li      obuf, OBUF
        li      ibuf_end, IBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      x_gs, C * 4
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
        shli    st_n0, tr, 2
        # x_src = x + (i0*C + j0)*4, y_dst = y + (j0*R + i0)*4
        muli    t0, i0, C * 4
        add     x_src, x_base, t0
        shli    t1, j0, 2
        add     x_src, x_src, t1
        muli    t0, j0, R * 4
        add     y_dst, y_base, t0
        shli    t1, i0, 2
        add     y_dst, y_dst, t1

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

        add     ibuf, ibuf, slot        # both rings advance together
        add     obuf, obuf, slot
        bne     ibuf, ibuf_end, same_lap
        li      ibuf, IBUF
        li      obuf, OBUF
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
