# softmax_rows.s -- numerically stable softmax of every row of x, on any number
# of cores.
#
#   y[i, :] = exp(x[i, :] - max_j x[i, j]) / sum_j exp(x[i, j] - max_j x[i, j])
#
# Work split: `.code all`; with P = ncores, core c takes rows
# [c*ROWS/P, (c+1)*ROWS/P) (integer division: the counts differ by at most one;
# a core with no rows halts at once). It walks its rows in blocks of up to BR
# whole rows; the last block of a core is br = min(BR, rows left) rows. A block
# of whole rows is contiguous in DRAM, so each load and store is a single 1-D
# DMA of br*COLS*4 bytes. The vector unit works on a block in place: rmax ->
# sub (col broadcast) -> exp -> rsum -> div (col broadcast), every instruction
# on exactly br x COLS elements; the per-row statistics go to a small STAT
# column (BR x 1).
#
# BR is as many rows as fit SLOT_BUDGET bytes (at least one), so the block size
# follows COLS: 16 rows of 512, 81 rows of 100, one row of 10000.
#
# Pipeline: a ring of NBUF block buffers, one semaphore per hand-off:
#     dma0:  wait X_FREE,  load block  -> slot, signal X_FULL
#     vec :  wait X_FULL,  softmax slot in place, signal Y_FULL
#     dma1:  wait Y_FULL,  store slot  -> y,    signal X_FREE
# X_FREE starts at NBUF. With NBUF = 3, loading block b+1, computing block b
# and storing block b-1 all run at once. Each engine handles the slots in the
# same cyclic order, so the slot of every hand-off is implied and one semaphore
# per hand-off is enough. ctl only queues work (the block's shape is in
# registers, which the engines read at dispatch) and never waits; every wait is
# matched by a signal queued earlier in program order (or an initial token).
#
# Assumptions: scratchpad >= NBUF*SLOT_BYTES + BR*4 bytes (about 96 KiB with
# the defaults; a row longer than SLOT_BUDGET needs NBUF*COLS*4 bytes, so COLS
# can be up to about 21000 on the 256 KiB scratchpad of the tiny preset). The
# vector unit may write its source in place (elementwise ops) and its
# instructions take effect in queue order, so STAT can be reused by consecutive
# instructions without semaphores.

.equ ROWS, 256
.equ COLS, 512
.equ NBUF, 3                    # block buffers in the ring
.equ SLOT_BUDGET, 32768         # bytes of rows per block buffer
.equ ROW_BYTES, COLS * 4
.equ BR_FIT, SLOT_BUDGET / ROW_BYTES
.equ BR, BR_FIT + 1 / (BR_FIT + 1)      # rows per block: BR_FIT, at least 1
.equ BLK_BYTES, BR * ROW_BYTES
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
.reg blk_n0,   r7               # br*COLS*4: bytes of the current block
.reg stat,     r8
.reg br,       r9               # rows of the current block
.reg cols,     r10
.reg n_left,   r11
.reg rows_left, r12             # rows left for this core
.reg t1,       r13
.reg br_max,   r14              # BR
.reg row_n0,   r15              # COLS*4

.code all
        li      n_left, NBUF            # NBUF free slots to start with
prime:  sync.signal ctl, X_FREE
        dbnz    n_left, prime

        # This core's rows: [first, last) = [c*ROWS/P, (c+1)*ROWS/P).
        csrr    t0, coreid
        csrr    t1, ncores
        li      rows_left, ROWS
        mul     x_src, t0, rows_left
        divu    x_src, x_src, t1        # first
        addi    t0, t0, 1
        mul     t0, t0, rows_left
        divu    t0, t0, t1              # last
        sub     rows_left, t0, x_src
        beq     rows_left, zero, done

        muli    t0, x_src, ROW_BYTES    # byte offset of this core's first row
        la      x_src, x
        add     x_src, x_src, t0
        la      y_dst, y
        add     y_dst, y_dst, t0

        li      buf, XBUF
        li      buf_end, XBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      stat, STAT
        li      br_max, BR
        li      cols, COLS
        li      row_n0, ROW_BYTES

block:
        min     br, rows_left, br_max   # br = min(BR, rows left)
        mul     blk_n0, br, row_n0
        sync.wait   dma0, X_FREE
        dma.ld      ch0, buf, x_src, blk_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma0, X_FULL

        sync.wait   vec, X_FULL
        v.rmax      f32, axis1, stat, buf, br, cols         # row max, br x 1
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
        sub     rows_left, rows_left, br
        blt     zero, rows_left, block  # while rows are left
done:
        halt
