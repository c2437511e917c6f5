# softmax_rows.s -- numerically stable softmax of every row of x, on 4 cores.
#
#   y[i, :] = exp(x[i, :] - max_j x[i, j]) / sum_j exp(x[i, j] - max_j x[i, j])
#
# Work split: core c takes rows [c*RPC, (c+1)*RPC), RPC = ROWS / NCORES, in
# blocks of BR whole rows. A block of whole rows is contiguous in DRAM, so each
# load and store is a single 1-D DMA of BR*COLS*4 bytes. The vector unit works
# on a block in place: rmax -> sub (col broadcast) -> exp -> rsum -> div (col
# broadcast); the per-row statistics go to a small STAT column (BR x 1).
#
# Pipeline: a ring of NBUF block buffers, one semaphore per hand-off:
#     dma0:  wait X_FREE,  load block  -> slot, signal X_FULL
#     vec :  wait X_FULL,  softmax slot in place, signal Y_FULL
#     dma1:  wait Y_FULL,  store slot  -> y,    signal X_FREE
# X_FREE starts at NBUF. With NBUF = 3, loading block b+1, computing block b
# and storing block b-1 all run at once. Each engine handles the slots in the
# same cyclic order, so the slot of every hand-off is implied and one semaphore
# per hand-off is enough. ctl only queues work and never waits; every wait is
# matched by a signal queued earlier in program order (or an initial token).
#
# Assumptions: scratchpad >= NBUF*BR*COLS*4 + 64 bytes (96 KiB + 64 with the
# defaults); ROWS divisible by NCORES*BR. The vector unit may write its source
# in place (elementwise ops) and its instructions take effect in queue order,
# so STAT can be reused by consecutive instructions without semaphores.

.equ NCORES, 4
.equ ROWS, 256
.equ COLS, 512
.equ BR, 16                     # rows per block
.equ NBUF, 3                    # block buffers in the ring
.equ RPC, ROWS / NCORES         # rows per core
.equ NBLK, RPC / BR             # blocks per core
.equ BLK_BYTES, BR * COLS * 4
.equ SLOT_BYTES, (BLK_BYTES + 63) / 64 * 64

.input  x, f32, ROWS, COLS
.output y, f32, ROWS, COLS

.local XBUF, f32, 0,                       NBUF * SLOT_BYTES / 4
.local STAT, f32, XBUF + NBUF * SLOT_BYTES, BR, 1

.sem X_FULL, s0
.sem Y_FULL, s1
.sem X_FREE, s2

.reg t0,       r1
.reg x_src,    r2
.reg y_dst,    r3
.reg buf,      r4
.reg buf_end,  r5
.reg slot,     r6
.reg blk_n0,   r7
.reg stat,     r8
.reg br,       r9
.reg cols,     r10
.reg n_left,   r11

.code 0-3
        li      n_left, NBUF            # NBUF free slots to start with
prime:  sync.signal ctl, X_FREE
        dbnz    n_left, prime

        csrr    t0, coreid
        muli    t0, t0, RPC * COLS * 4  # byte offset of this core's first row
        la      x_src, x
        add     x_src, x_src, t0
        la      y_dst, y
        add     y_dst, y_dst, t0

        li      buf, XBUF
        li      buf_end, XBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      blk_n0, BLK_BYTES
        li      stat, STAT
        li      br, BR
        li      cols, COLS

        li      n_left, NBLK
block:
        sync.wait   dma0, X_FREE
        dma.ld      ch0, buf, x_src, blk_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma0, X_FULL

        sync.wait   vec, X_FULL
        v.rmax      f32, axis1, stat, buf, br, cols         # row max, BR x 1
        v.sub       f32, col, buf, buf, stat, br, cols      # x - max <= 0: exp cannot overflow
        v.exp       f32, buf, buf, br, cols
        v.rsum      f32, axis1, stat, buf, br, cols         # row sum >= 1
        v.div       f32, col, buf, buf, stat, br, cols
        sync.signal vec, Y_FULL

        sync.wait   dma1, Y_FULL
        dma.st      ch1, y_dst, buf, blk_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma1, X_FREE

        add     x_src, x_src, blk_n0
        add     y_dst, y_dst, blk_n0
        add     buf, buf, slot          # next slot of the ring
        bne     buf, buf_end, same_lap
        li      buf, XBUF
same_lap:
        dbnz    n_left, block
        halt
