# gemm.s -- C = A * B on any number of cores: bf16 inputs, f32 accumulation,
# bf16 output. Runs on every core of the chip, one core or sixteen, and on any
# M, N, K >= 1.
#
# Tiling: C is cut into TM x TN output tiles, MT = ceil(M/TM) tile rows by
# NT = ceil(N/TN) tile columns, numbered row-major: tile t covers rows
# m0 = (t / NT)*TM and columns n0 = (t % NT)*TN. The last tile row and column may
# be short: a tile is mt = min(TM, M - m0) by nt = min(TN, N - n0). Each tile is
# the sum over KT = ceil(K/TK) steps of TK deep, the last one kt = min(TK, K - k0):
#
#   for each tile of this core:                           (accumulator slot i%2)
#     for k0 in 0, TK, 2*TK, ... < K:                     (step s, operand slot s%2)
#       ABUF[s%2] = A[m0 : +mt, k0 : +kt]                 dma0  (mt x kt, dense)
#       BBUF[s%2] = B[k0 : +kt, n0 : +nt]                 dma1  (kt x nt, dense)
#       ACC[i%2] (+)= ABUF[s%2] * BBUF[s%2]               tc    (first step overwrites, then `acc`)
#     OBUF[i%2] = bf16(ACC[i%2])                          vec   (mt x nt)
#     C[m0 : +mt, n0 : +nt] = OBUF[i%2]                   dma2  (row stride N*2 bytes in DRAM)
#
# Local tiles are dense (row stride = the tile's actual width), so a short tile
# is just a smaller dense tile at the same slot address and every engine works on
# exactly the valid elements: no padding, no masking, no clean-up pass.
#
# Work split: `.code all`; with T = MT*NT tiles and P = ncores, core c takes the
# tiles [c*T/P, (c+1)*T/P) (integer division), so the counts differ by at most
# one. A core whose range is empty halts at once. Consecutive tiles of a core
# are neighbours in a tile row, so they share A's row block (which is still
# reloaded for every tile: that keeps one loop shape for both operands).
#
# Every double buffer is a two-slot ring between one producer and one consumer
# engine, guarded by a FULL and a FREE semaphore:
#     producer: wait FREE, fill slot, signal FULL     consumer: wait FULL, use slot, signal FREE
# FREE starts at 2 (signalled twice by ctl at the start), so the producer runs up
# to two slots ahead. Engines run their queues in order, so the slot of each use
# is implied by its position in the sequence and one semaphore pair per ring is
# enough; separate semaphores per slot would also need the loop body unrolled by
# two, because the semaphore is an immediate operand.
#
#   ring      producer -> consumer   semaphores
#   A tiles   dma0 -> tc             A_FULL / A_FREE
#   B tiles   dma1 -> tc             B_FULL / B_FREE
#   ACC       tc   -> vec            ACC_FULL / ACC_FREE
#   OBUF      vec  -> dma2           OUT_FULL / OUT_FREE
#
# The control unit never waits inside the loops: it only queues work (with the
# shape of each step in registers, which the engines read at dispatch), so the
# loads of step s+1 run on dma0/dma1 while tc multiplies step s, and the
# convert/store of tile i overlaps the multiplies of tile i+1. Every sync.wait is
# matched by a signal queued earlier in program order (or by the initial FREE
# tokens), so the protocol cannot deadlock even when engine queues are short and
# the control unit stalls on a full queue. The FREE semaphores end at 2, harmless
# since semaphores start at 0 with each launch. (ctl must not wait on them to
# tidy up before a `fence`: it would race the engines for the tokens.)
#
# Sizes: the tile buffers are sized for full tiles whatever M, N, K are. With
# the defaults (TM = 128, TN = 64, TK = 256) the scratchpad holds 2 A tiles of
# 64 KiB, 2 B tiles of 32 KiB and 2 output tiles of 16 KiB (224 KiB) and the
# accumulator 2 tiles of 32 KiB (64 KiB): that fits the smallest preset (tiny:
# 256 KiB + 64 KiB). The accumulator bounds TM*TN (double-buffered f32 tiles);
# on a weight-stationary array a block of B is pinned per fold and the TM rows
# of A stream through it, so a tall TM amortizes the fill, and a deep TK means
# fewer, longer DMAs and tensor-core instructions. The tensor core must take
# bf16 inputs (every preset does). Bigger chips can use bigger tiles: change
# TM, TN, TK (any positive values whose buffers fit the chip's memories).

.equ M, 256
.equ N, 256
.equ K, 256
.equ TM, 128                    # rows per output tile
.equ TN, 64                     # columns per output tile
.equ TK, 256                    # depth of one K step
.equ MT, (M + TM - 1) / TM      # tile rows
.equ NT, (N + TN - 1) / TN      # tile columns
.equ NTILES, MT * NT

.equ A_BYTES, TM * TK * 2       # bf16 tiles
.equ B_BYTES, TK * TN * 2
.equ O_BYTES, TM * TN * 2
.equ ACC_BYTES, TM * TN * 4     # f32 accumulator tile

.input  A, bf16, M, K
.input  B, bf16, K, N
.output C, bf16, M, N

# Scratchpad: regions rounded up to 64 bytes.
.local ABUF0, bf16, 0,                                 TM, TK
.local ABUF1, bf16, (ABUF0 + A_BYTES + 63) / 64 * 64, TM, TK
.local BBUF0, bf16, (ABUF1 + A_BYTES + 63) / 64 * 64, TK, TN
.local BBUF1, bf16, (BBUF0 + B_BYTES + 63) / 64 * 64, TK, TN
.local OBUF0, bf16, (BBUF1 + B_BYTES + 63) / 64 * 64, TM, TN
.local OBUF1, bf16, (OBUF0 + O_BYTES + 63) / 64 * 64, TM, TN
# Accumulator.
.local ACC0,  f32,  0x40000000,                        TM, TN
.local ACC1,  f32,  (ACC0 + ACC_BYTES + 63) / 64 * 64, TM, TN

.sem A_FULL,   s0
.sem A_FREE,   s1
.sem B_FULL,   s2
.sem B_FREE,   s3
.sem ACC_FULL, s4
.sem ACC_FREE, s5
.sem OUT_FULL, s6
.sem OUT_FREE, s7

.reg t0,      r1
.reg t1,      r2
.reg m0,      r3                # first row of the current tile
.reg n0,      r4                # first column of the current tile
.reg a_src,   r5                # global: A[m0, k0]
.reg b_src,   r6                # global: B[k0, n0]
.reg c_dst,   r7                # global: C[m0, n0]
.reg a_buf,   r8                # local slots, flipped with xor
.reg b_buf,   r9
.reg acc_t,   r10
.reg o_buf,   r11
.reg a_flip,  r12
.reg b_flip,  r13
.reg acc_flip, r14
.reg o_flip,  r15
.reg n_left,  r16               # tiles left for this core
.reg k_left,  r17               # K - k0
.reg mt,      r18               # rows of the current tile
.reg nt,      r19               # columns of the current tile
.reg kt,      r20               # depth of the current K step
.reg a_n0,    r21               # kt*2: A tile row in bytes (also its local row stride)
.reg o_n0,    r22               # nt*2: B/C tile row in bytes (also their local row stride)
.reg a_gs,    r23               # A row stride in DRAM: K*2
.reg b_gs,    r24               # B and C row stride in DRAM: N*2
.reg b_kstep, r25               # TK rows of B: TK*N*2
.reg ka,      r26               # TK*2: A column step
.reg c_base,  r27               # global address of C
.reg kk,      r28               # K
.reg ntiles,  r29
.reg lim,     r30               # scratch: TM / TN / TK limits

.code all
        sync.signal ctl, A_FREE         # two free slots in every ring
        sync.signal ctl, A_FREE
        sync.signal ctl, B_FREE
        sync.signal ctl, B_FREE
        sync.signal ctl, ACC_FREE
        sync.signal ctl, ACC_FREE
        sync.signal ctl, OUT_FREE
        sync.signal ctl, OUT_FREE

        # This core's tiles: [first, last) = [c*T/P, (c+1)*T/P).
        csrr    t0, coreid
        csrr    t1, ncores
        li      ntiles, NTILES
        mul     n_left, t0, ntiles
        divu    n_left, n_left, t1      # first
        addi    t0, t0, 1
        mul     t0, t0, ntiles
        divu    t0, t0, t1              # last
        sub     t0, t0, n_left          # tile count
        li      t1, NT
        remu    n0, n_left, t1          # first tile's column and row
        divu    m0, n_left, t1
        mov     n_left, t0
        beq     n_left, zero, done
        muli    m0, m0, TM
        muli    n0, n0, TN

        li      a_buf, ABUF0
        li      b_buf, BBUF0
        li      acc_t, ACC0
        li      o_buf, OBUF0
        li      a_flip, ABUF0 ^ ABUF1
        li      b_flip, BBUF0 ^ BBUF1
        li      acc_flip, ACC0 ^ ACC1
        li      o_flip, OBUF0 ^ OBUF1
        li      a_gs, K * 2
        li      b_gs, N * 2
        li      b_kstep, TK * N * 2
        li      ka, TK * 2
        la      c_base, C
        li      kk, K

tile:
        # Shape of this tile: mt = min(TM, M - m0), nt = min(TN, N - n0).
        li      lim, M
        sub     mt, lim, m0
        li      lim, TM
        min     mt, mt, lim
        li      lim, N
        sub     nt, lim, n0
        li      lim, TN
        min     nt, nt, lim
        shli    o_n0, nt, 1
        # a_src = A + m0*K*2, b_src = B + n0*2, c_dst = C + m0*N*2 + n0*2.
        la      a_src, A
        muli    t0, m0, K * 2
        add     a_src, a_src, t0
        la      b_src, B
        shli    t1, n0, 1
        add     b_src, b_src, t1
        muli    c_dst, m0, N * 2
        add     c_dst, c_dst, t1
        add     c_dst, c_dst, c_base

        mov     k_left, kk
        li      lim, TK
        sync.wait tc, ACC_FREE          # vec has drained this accumulator slot
k_loop:
        min     kt, k_left, lim         # kt = min(TK, K - k0)
        shli    a_n0, kt, 1
        sync.wait   dma0, A_FREE
        dma.ld      ch0, a_buf, a_src, a_n0, mt, zero, a_n0, a_gs, zero, zero
        sync.signal dma0, A_FULL
        sync.wait   dma1, B_FREE
        dma.ld      ch1, b_buf, b_src, o_n0, kt, zero, o_n0, b_gs, zero, zero
        sync.signal dma1, B_FULL

        sync.wait   tc, A_FULL
        sync.wait   tc, B_FULL
        bne         k_left, kk, k_accumulate
        tc.mm       bf16, none, acc_t, a_buf, b_buf, mt, nt, kt     # first K step overwrites
        jmp         k_issued
k_accumulate:
        tc.mm       bf16, acc, acc_t, a_buf, b_buf, mt, nt, kt
k_issued:
        sync.signal tc, A_FREE
        sync.signal tc, B_FREE

        xor     a_buf, a_buf, a_flip
        xor     b_buf, b_buf, b_flip
        add     a_src, a_src, ka
        add     b_src, b_src, b_kstep
        sub     k_left, k_left, lim
        blt     zero, k_left, k_loop    # while K - k0 > 0
        sync.signal tc, ACC_FULL

        # Tile done: convert and store it while tc starts on the next one.
        sync.wait   vec, ACC_FULL
        sync.wait   vec, OUT_FREE
        v.cvt       bf16, f32, o_buf, acc_t, mt, nt
        sync.signal vec, ACC_FREE
        sync.signal vec, OUT_FULL
        sync.wait   dma2, OUT_FULL
        dma.st      ch2, c_dst, o_buf, o_n0, mt, zero, b_gs, o_n0, zero, zero
        sync.signal dma2, OUT_FREE

        xor     acc_t, acc_t, acc_flip
        xor     o_buf, o_buf, o_flip
        # Next tile in row-major order: n0 += TN, wrapping to the next tile row.
        addi    n0, n0, TN
        li      lim, N
        blt     n0, lim, same_row
        li      n0, 0
        addi    m0, m0, TM
same_row:
        dbnz    n_left, tile
done:
        halt
