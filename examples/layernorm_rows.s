# layernorm_rows.s -- layer normalization of every row of x, on 4 cores.
#
#   mean = sum_j x[i, j] / COLS
#   var  = sum_j (x[i, j] - mean)^2 / COLS              (biased, as in LayerNorm)
#   y[i, j] = (x[i, j] - mean) * rsqrt(var + EPS) * gamma[j] + beta[j]
#
# The variance is computed from the centred block (two passes over the data in
# local memory) rather than as E[x^2] - mean^2, which cancels badly when
# |mean| >> std. 1/COLS and EPS come from the `.data` constant LN_CONST and are
# applied with scalar broadcast; gamma and beta are 1 x COLS rows applied with
# row broadcast; mean and rstd are BR x 1 columns applied with col broadcast.
#
# Work split: core c takes rows [c*RPC, (c+1)*RPC), RPC = ROWS / NCORES, in
# blocks of BR whole rows (one contiguous 1-D DMA per block). The block is
# normalized in place; SQ holds the squared deviations for the variance sum.
#
# Semaphores:
#   PARAMS  dma2 -> vec   gamma, beta and LN_CONST are loaded once; vec waits
#                         for them once, before its first block.
#   X_FULL  dma0 -> vec   block loaded                     \  ring of NBUF block
#   Y_FULL  vec  -> dma1  block normalized                  > buffers, as in
#   X_FREE  dma1 -> dma0  block stored, slot free (starts   /  softmax_rows.s
#                         at NBUF)
# ctl only queues work; every wait is matched by a signal queued before it.
#
# Assumptions: scratchpad >= (NBUF + 1)*BR*COLS*4 + 2*COLS*4 + 2*BR*4 + 64
# bytes (about 132 KiB with the defaults); ROWS divisible by NCORES*BR. The
# vector unit may work in place and its instructions take effect in queue order.
# LN_CONST holds 1/COLS as a literal: change it together with COLS (the
# assembler has no floating-point expressions).

.equ NCORES, 4
.equ ROWS, 256
.equ COLS, 512
.equ BR, 16                     # rows per block
.equ NBUF, 3                    # block buffers in the ring
.equ RPC, ROWS / NCORES
.equ NBLK, RPC / BR
.equ BLK_BYTES, BR * COLS * 4
.equ SLOT_BYTES, (BLK_BYTES + 63) / 64 * 64
.equ VEC_BYTES, (COLS * 4 + 63) / 64 * 64   # a 1 x COLS row, rounded up
.equ COL_BYTES, (BR * 4 + 63) / 64 * 64     # a BR x 1 column, rounded up

.input  x, f32, ROWS, COLS
.input  gamma, f32, COLS
.input  beta, f32, COLS
.output y, f32, ROWS, COLS

.data LN_CONST, f32, 2
        .values 0.001953125, 1e-5       # 1/COLS (COLS = 512), EPS

.local XBUF,   f32, 0,                        NBUF * SLOT_BYTES / 4
.local SQ,     f32, XBUF + NBUF * SLOT_BYTES, BR, COLS
.local GAMMA,  f32, SQ + SLOT_BYTES,          1, COLS
.local BETA,   f32, GAMMA + VEC_BYTES,        1, COLS
.local MEAN,   f32, BETA + VEC_BYTES,         BR, 1
.local RSTD,   f32, MEAN + COL_BYTES,         BR, 1
.local CONST,  f32, RSTD + COL_BYTES,         2
.equ   INV_N, CONST                  # 1/COLS
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
.reg blk_n0,   r8
.reg br,       r9
.reg cols,     r10
.reg one,      r11
.reg sq,       r12
.reg mean,     r13
.reg rstd,     r14
.reg inv_n,    r15
.reg eps,      r16
.reg gam,      r17
.reg bet,      r18
.reg n_left,   r19

.code 0-3
        li      n_left, NBUF
prime:  sync.signal ctl, X_FREE
        dbnz    n_left, prime

        # Parameters, once per core, on their own channel.
        li      t0, COLS * 4
        li      gam, GAMMA
        la      t1, gamma
        dma.ld  ch2, gam, t1, t0, zero, zero, zero, zero, zero, zero
        li      bet, BETA
        la      t1, beta
        dma.ld  ch2, bet, t1, t0, zero, zero, zero, zero, zero, zero
        li      t0, 8
        li      inv_n, INV_N
        la      t1, LN_CONST
        dma.ld  ch2, inv_n, t1, t0, zero, zero, zero, zero, zero, zero
        sync.signal dma2, PARAMS
        sync.wait   vec, PARAMS

        csrr    t0, coreid
        muli    t0, t0, RPC * COLS * 4
        la      x_src, x
        add     x_src, x_src, t0
        la      y_dst, y
        add     y_dst, y_dst, t0

        li      buf, XBUF
        li      buf_end, XBUF + NBUF * SLOT_BYTES
        li      slot, SLOT_BYTES
        li      blk_n0, BLK_BYTES
        li      br, BR
        li      cols, COLS
        li      one, 1
        li      sq, SQ
        li      mean, MEAN
        li      rstd, RSTD
        li      eps, EPS_AT

        li      n_left, NBLK
block:
        sync.wait   dma0, X_FREE
        dma.ld      ch0, buf, x_src, blk_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma0, X_FULL

        sync.wait   vec, X_FULL
        v.rsum      f32, axis1, mean, buf, br, cols
        v.mul       f32, scalar, mean, mean, inv_n, br, one     # mean
        v.sub       f32, col, buf, buf, mean, br, cols          # centre in place
        v.mul       f32, full, sq, buf, buf, br, cols
        v.rsum      f32, axis1, rstd, sq, br, cols
        v.mul       f32, scalar, rstd, rstd, inv_n, br, one     # variance
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
        dbnz    n_left, block
        halt
