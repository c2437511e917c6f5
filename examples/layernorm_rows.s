# layernorm_rows.s -- layer normalization of every row of x, on any number of
# cores.
#
#   mean = sum_j x[i, j] / COLS
#   var  = sum_j (x[i, j] - mean)^2 / COLS              (biased, as in LayerNorm)
#   y[i, j] = (x[i, j] - mean) * rsqrt(var + EPS) * gamma[j] + beta[j]
#
# The variance is computed from the centred block (two passes over the data in
# local memory) rather than as E[x^2] - mean^2, which cancels badly when
# |mean| >> std. COLS (as f32) and EPS sit in the 2-element CONST region: the
# vector unit builds them once before its first block (v.fill of the integer
# COLS, v.cvt to f32; v.fill of EPS's f32 bit pattern), so nothing has to be
# edited by hand when COLS changes. They are applied with scalar broadcast;
# gamma and beta are 1 x COLS rows applied with row broadcast; mean and rstd are
# br x 1 columns applied with col broadcast.
#
# Work split: `.code all`; with P = ncores, core c takes rows
# [c*ROWS/P, (c+1)*ROWS/P) (integer division: counts differ by at most one; a
# core with no rows halts at once), in blocks of up to BR whole rows, the last
# one br = min(BR, rows left) rows (one contiguous 1-D DMA per block). BR is as
# many rows as fit SLOT_BUDGET bytes, at least one. The block is normalized in
# place; SQ holds the squared deviations for the variance sum.
#
# Semaphores:
#   PARAMS  dma2 -> vec   gamma and beta are loaded once; vec waits for them
#                         once, before its first block.
#   X_FULL  dma0 -> vec   block loaded                     \  ring of NBUF block
#   Y_FULL  vec  -> dma1  block normalized                  > buffers, as in
#   X_FREE  dma1 -> dma0  block stored, slot free (starts   /  softmax_rows.s
#                         at NBUF)
# ctl only queues work (each block's shape is in registers, read by the engines
# at dispatch); every wait is matched by a signal queued before it.
#
# Assumptions: scratchpad >= (NBUF + 1)*SLOT_BYTES + 2*COLS*4 + 2*BR*4 + 128
# bytes (about 132 KiB with the defaults; with rows longer than SLOT_BUDGET,
# 24*COLS bytes, so COLS up to about 10000 on the tiny preset). The vector unit
# may work in place and its instructions take effect in queue order.

.equ ROWS, 256
.equ COLS, 512
.equ NBUF, 3                    # block buffers in the ring
.equ SLOT_BUDGET, 32768         # bytes of rows per block buffer
.equ ROW_BYTES, COLS * 4
.equ BR_FIT, SLOT_BUDGET / ROW_BYTES
.equ BR, BR_FIT + 1 / (BR_FIT + 1)      # rows per block: BR_FIT, at least 1
.equ BLK_BYTES, BR * ROW_BYTES
.equ SLOT_BYTES, (BLK_BYTES + 63) / 64 * 64
.equ VEC_BYTES, (COLS * 4 + 63) / 64 * 64   # a 1 x COLS row, rounded up
.equ COL_BYTES, (BR * 4 + 63) / 64 * 64     # a BR x 1 column, rounded up

.input  x, f32, ROWS, COLS
.input  gamma, f32, COLS
.input  beta, f32, COLS
.output y, f32, ROWS, COLS

.local XBUF,   f32, 0,                        NBUF * SLOT_BYTES / 4
.local SQ,     f32, XBUF + NBUF * SLOT_BYTES, BR, COLS
.local GAMMA,  f32, SQ + SLOT_BYTES,          1, COLS
.local BETA,   f32, GAMMA + VEC_BYTES,        1, COLS
.local MEAN,   f32, BETA + VEC_BYTES,         BR, 1
.local RSTD,   f32, MEAN + COL_BYTES,         BR, 1
.local CONST,  f32, RSTD + COL_BYTES,         2
.equ   N_AT,   CONST                 # COLS as f32
.equ   EPS_AT, CONST + 4             # EPS

.sem X_FULL, s0
.sem Y_FULL, s1
.sem X_FREE, s2
.sem PARAMS, s3

.reg t0,       r1
.reg t1,       r2
.reg x_src,    r3
.reg y_dst,    r4
.reg buf,      r5
.reg buf_end,  r6
.reg slot,     r7
.reg blk_n0,   r8               # br*COLS*4: bytes of the current block
.reg br,       r9               # rows of the current block
.reg cols,     r10
.reg one,      r11
.reg sq,       r12
.reg mean,     r13
.reg rstd,     r14
.reg n_f,      r15
.reg eps,      r16
.reg gam,      r17
.reg bet,      r18
.reg n_left,   r19
.reg rows_left, r20             # rows left for this core
.reg br_max,   r21              # BR
.reg row_n0,   r22              # COLS*4

.code all
        li      n_left, NBUF
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

        # Parameters, once per core, on their own channel.
        li      row_n0, ROW_BYTES
        li      gam, GAMMA
        la      t1, gamma
        dma.ld  ch2, gam, t1, row_n0, zero, zero, zero, zero, zero, zero
        li      bet, BETA
        la      t1, beta
        dma.ld  ch2, bet, t1, row_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma2, PARAMS
        # Constants, built by the vector unit ahead of its first block.
        li      one, 1
        li      n_f, N_AT
        li      eps, EPS_AT
        li      t1, COLS
        v.fill  i32, n_f, t1, one, one
        v.cvt   f32, i32, n_f, n_f, one, one        # COLS as f32 (exact up to 2^24)
        li      t1, f32(1e-5)
        v.fill  f32, eps, t1, one, one              # EPS
        sync.wait   vec, PARAMS

        muli    t0, x_src, ROW_BYTES    # byte offset of this core's first row
        la      x_src, x
        add     x_src, x_src, t0
        la      y_dst, y
        add     y_dst, y_dst, t0

        li      buf, XBUF
        li      buf_end, XBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      br_max, BR
        li      cols, COLS
        li      sq, SQ
        li      mean, MEAN
        li      rstd, RSTD

block:
        min     br, rows_left, br_max   # br = min(BR, rows left)
        mul     blk_n0, br, row_n0
        sync.wait   dma0, X_FREE
        dma.ld      ch0, buf, x_src, blk_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma0, X_FULL

        sync.wait   vec, X_FULL
        v.rsum      f32, axis1, mean, buf, br, cols
        v.div       f32, scalar, mean, mean, n_f, br, one       # mean
        v.sub       f32, col, buf, buf, mean, br, cols          # centre in place
        v.mul       f32, full, sq, buf, buf, br, cols
        v.rsum      f32, axis1, rstd, sq, br, cols
        v.div       f32, scalar, rstd, rstd, n_f, br, one       # variance
        v.add       f32, scalar, rstd, rstd, eps, br, one
        v.rsqrt     f32, rstd, rstd, br, one
        v.mul       f32, col, buf, buf, rstd, br, cols
        v.mul       f32, row, buf, buf, gam, br, cols
        v.add       f32, row, buf, buf, bet, br, cols
        sync.signal vec, Y_FULL

        sync.wait   dma1, Y_FULL
        dma.st      ch1, y_dst, buf, blk_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma1, X_FREE

        add     x_src, x_src, blk_n0
        add     y_dst, y_dst, blk_n0
        add     buf, buf, slot
        bne     buf, buf_end, same_lap
        li      buf, XBUF
same_lap:
        sub     rows_left, rows_left, br
        blt     zero, rows_left, block  # while rows are left
done:
        halt
