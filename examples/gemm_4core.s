# gemm_4core.s -- C = A * B on 4 cores: bf16 inputs, f32 accumulation, bf16 output.
#
# Work split: core c computes the row block C[c*MC : (c+1)*MC, :], MC = M / NCORES.
# The row block is produced in NT column tiles of TN columns; each column tile
# is a sum of KT products over K tiles of TK:
#
#   for n in 0 .. NT-1:                                   (accumulator slot n%2)
#     for k in 0 .. KT-1:                                 (step t = n*KT + k, operand slot t%2)
#       ABUF[t%2] = A[rows, k*TK : +TK]                   dma0  (MC x TK)
#       BBUF[t%2] = B[k*TK : +TK, n*TN : +TN]             dma1  (TK x TN)
#       ACC[n%2] (+)= ABUF[t%2] * BBUF[t%2]               tc    (first k overwrites, then `acc`)
#     OBUF[n%2] = bf16(ACC[n%2])                          vec
#     C[rows, n*TN : +TN] = OBUF[n%2]                     dma2  (row stride N*2 bytes in DRAM)
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
# The control unit never waits inside the loops: it only queues work, so the
# loads of step t+1 run on dma0/dma1 while tc multiplies step t, and the
# convert/store of column tile n overlaps the multiplies of tile n+1. Every
# sync.wait is matched by a signal queued earlier in program order (or by the
# initial FREE tokens), so the protocol cannot deadlock even when engine queues
# are short and the control unit stalls on a full queue. The FREE semaphores end
# at 2, harmless since semaphores start at 0 with each launch. (ctl must not wait
# on them to tidy up before a `fence`: it would race the engines for the tokens.)
#
# Assumptions: 4 cores; scratchpad >= 48 KiB and accumulator >= 32 KiB per core
# with the default sizes (6 tiles of 8 KiB; 2 accumulator tiles of 16 KiB).
# M divisible by NCORES, MC = M / NCORES; N divisible by TN; K divisible by TK.
# A's tiles are reloaded for every column tile (NT times in all): that keeps one
# loop shape for both operands; keeping the core's whole A row block resident
# instead (MC*K*2 bytes, 32 KiB here) would save (NT-1)/NT of the A traffic.

.equ NCORES, 4
.equ M, 256
.equ N, 256
.equ K, 256
.equ MC, M / NCORES             # rows of C per core
.equ TN, 64                     # columns per output tile
.equ TK, 64                     # depth of one K tile
.equ NT, N / TN
.equ KT, K / TK

.equ A_BYTES, MC * TK * 2       # bf16 tiles
.equ B_BYTES, TK * TN * 2
.equ O_BYTES, MC * TN * 2
.equ ACC_BYTES, MC * TN * 4     # f32 accumulator tile

.input  A, bf16, M, K
.input  B, bf16, K, N
.output C, bf16, M, N

# Scratchpad: regions rounded up to 64 bytes.
.local ABUF0, bf16, 0,                                 MC, TK
.local ABUF1, bf16, (ABUF0 + A_BYTES + 63) / 64 * 64, MC, TK
.local BBUF0, bf16, (ABUF1 + A_BYTES + 63) / 64 * 64, TK, TN
.local BBUF1, bf16, (BBUF0 + B_BYTES + 63) / 64 * 64, TK, TN
.local OBUF0, bf16, (BBUF1 + B_BYTES + 63) / 64 * 64, MC, TN
.local OBUF1, bf16, (OBUF0 + O_BYTES + 63) / 64 * 64, MC, TN
# Accumulator.
.local ACC0,  f32,  0x40000000,                        MC, TN
.local ACC1,  f32,  (ACC0 + ACC_BYTES + 63) / 64 * 64, MC, TN

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
.reg a_row,   r3                # global: A[row0, 0]
.reg a_src,   r4                # global: current A tile
.reg b_col,   r5                # global: B[0, n*TN]
.reg b_src,   r6                # global: current B tile
.reg c_dst,   r7                # global: C[row0, n*TN]
.reg a_buf,   r8                # local slots, flipped with xor
.reg b_buf,   r9
.reg acc_t,   r10
.reg o_buf,   r11
.reg a_flip,  r12
.reg b_flip,  r13
.reg acc_flip, r14
.reg o_flip,  r15
.reg n_left,  r16
.reg k_left,  r17
.reg kt,      r18
.reg mc,      r19
.reg tn,      r20
.reg tk,      r21
.reg a_n0,    r22               # A tile row: TK*2 bytes (also its local row stride and K step)
.reg a_gs,    r23               # A row stride in DRAM: K*2
.reg b_n0,    r24               # B/C tile row: TN*2 bytes (also their local row stride and N step)
.reg b_gs,    r25               # B and C row stride in DRAM: N*2
.reg b_kstep, r26               # TK rows of B: TK*N*2

.code 0-3
        sync.signal ctl, A_FREE         # two free slots in every ring
        sync.signal ctl, A_FREE
        sync.signal ctl, B_FREE
        sync.signal ctl, B_FREE
        sync.signal ctl, ACC_FREE
        sync.signal ctl, ACC_FREE
        sync.signal ctl, OUT_FREE
        sync.signal ctl, OUT_FREE

        csrr    t0, coreid
        muli    t0, t0, MC              # first row of this core's block
        muli    t1, t0, K * 2
        la      a_row, A
        add     a_row, a_row, t1
        muli    t1, t0, N * 2
        la      c_dst, C
        add     c_dst, c_dst, t1
        la      b_col, B

        li      a_buf, ABUF0
        li      b_buf, BBUF0
        li      acc_t, ACC0
        li      o_buf, OBUF0
        li      a_flip, ABUF0 ^ ABUF1
        li      b_flip, BBUF0 ^ BBUF1
        li      acc_flip, ACC0 ^ ACC1
        li      o_flip, OBUF0 ^ OBUF1
        li      kt, KT
        li      mc, MC
        li      tn, TN
        li      tk, TK
        li      a_n0, TK * 2
        li      a_gs, K * 2
        li      b_n0, TN * 2
        li      b_gs, N * 2
        li      b_kstep, TK * N * 2

        li      n_left, NT
n_loop:
        mov     a_src, a_row
        mov     b_src, b_col
        mov     k_left, kt
        sync.wait tc, ACC_FREE          # vec has drained this accumulator slot
k_loop:
        sync.wait   dma0, A_FREE
        dma.ld      ch0, a_buf, a_src, a_n0, mc, zero, a_n0, a_gs, zero, zero
        sync.signal dma0, A_FULL
        sync.wait   dma1, B_FREE
        dma.ld      ch1, b_buf, b_src, b_n0, tk, zero, b_n0, b_gs, zero, zero
        sync.signal dma1, B_FULL

        sync.wait   tc, A_FULL
        sync.wait   tc, B_FULL
        bne         k_left, kt, k_accumulate
        tc.mm       bf16, none, acc_t, a_buf, b_buf, mc, tn, tk     # first K tile overwrites
        jmp         k_issued
k_accumulate:
        tc.mm       bf16, acc, acc_t, a_buf, b_buf, mc, tn, tk
k_issued:
        sync.signal tc, A_FREE
        sync.signal tc, B_FREE

        xor     a_buf, a_buf, a_flip
        xor     b_buf, b_buf, b_flip
        add     a_src, a_src, a_n0
        add     b_src, b_src, b_kstep
        dbnz    k_left, k_loop
        sync.signal tc, ACC_FULL

        # Column tile done: convert and store it while tc starts on the next one.
        sync.wait   vec, ACC_FULL
        sync.wait   vec, OUT_FREE
        v.cvt       bf16, f32, o_buf, acc_t, mc, tn
        sync.signal vec, ACC_FREE
        sync.signal vec, OUT_FULL
        sync.wait   dma2, OUT_FULL
        dma.st      ch2, c_dst, o_buf, b_n0, mc, zero, b_gs, b_n0, zero, zero
        sync.signal dma2, OUT_FREE

        xor     acc_t, acc_t, acc_flip
        xor     o_buf, o_buf, o_flip
        add     c_dst, c_dst, b_n0
        add     b_col, b_col, b_n0
        dbnz    n_left, n_loop

        halt
