# noc_ring.s -- pass a tile to the next core over the NoC and add it there.
#
# x holds one TR x TC tile per core (core c's tile is rows [c*TR, (c+1)*TR)).
# Every core c sends its tile to core (c+1) % NCORES and computes
#     y tile c = x tile c + x tile (c-1) % NCORES.
#
# Per core (all four run the same code):
#   dma0: load own tile -> OWN;            signal OWN_SEND, OWN_ADD
#   ctl : barrier 0                        (see below)
#   dma1: wait OWN_SEND; dma.send OWN -> RECV of core c+1, which signals RECV_FULL there
#   vec : wait OWN_ADD; wait RECV_FULL;  RECV = OWN + RECV;  signal SUM_DONE
#   dma0: wait SUM_DONE; store RECV -> y tile c
#
# RECV_FULL is the only semaphore raised by another core: the predecessor's
# dma.send increments it once the data has landed, so the receiver's vector
# unit reads RECV only after the whole tile is there. The sum is written into
# RECV, not OWN, because our own dma.send may still be reading OWN when the
# predecessor's tile arrives. OWN has two consumers (send, add), so dma0
# signals one semaphore per consumer. A single semaphore signalled twice would
# do for one exchange, but not in a loop: one engine could run ahead and take
# the other's token, i.e. use a buffer before it was loaded.
#
# Barrier: a core's semaphores and local memory belong to its launch, so no
# core writes into another one (dma.send) before all of them have started;
# `barrier 0` after queuing the load lets the load overlap the wait. Nothing
# else needs one: each RECV buffer is written once, and a core cannot finish
# before its incoming tile has arrived, because its vector unit waits for it.
#
# Assumptions: exactly NCORES cores run the launch (`barrier` joins all of them);
# scratchpad >= 2*TR*TC*4 bytes (64 KiB with the defaults). Unlike the other
# examples this demo is written for NCORES = 4 cores, `.code 0-3`: on a bigger
# chip (large: 16 cores) only cores 0-3 have code, so only they are launched
# and joined by the barrier; a chip with fewer cores (tiny) cannot load it
# (npu-sim refuses code for cores the chip does not have).

.equ NCORES, 4
.equ TR, 64
.equ TC, 128
.equ TILE_BYTES, TR * TC * 4

.input  x, f32, NCORES * TR, TC
.output y, f32, NCORES * TR, TC

.local OWN,  f32, 0,                                TR, TC
.local RECV, f32, (OWN + TILE_BYTES + 63) / 64 * 64, TR, TC

.sem OWN_SEND,  s0
.sem OWN_ADD,   s1
.sem RECV_FULL, s2              # raised by the predecessor core
.sem SUM_DONE,  s3

.reg me,       r1
.reg next,     r2
.reg ncores,   r3
.reg x_src,    r4
.reg y_dst,    r5
.reg own,      r6
.reg recv,     r7
.reg tile_n0,  r8
.reg row_n0,   r9
.reg tr,       r10
.reg tc_n,     r11

.code 0-3
        csrr    me, coreid
        li      ncores, NCORES
        addi    next, me, 1             # next = (me + 1) % NCORES
        blt     next, ncores, have_next
        li      next, 0
have_next:
        muli    x_src, me, TILE_BYTES   # tiles are contiguous in x and y
        la      y_dst, y
        add     y_dst, y_dst, x_src
        la      own, x
        add     x_src, x_src, own

        li      own, OWN
        li      recv, RECV
        li      tile_n0, TILE_BYTES
        li      row_n0, TC * 4
        li      tr, TR
        li      tc_n, TC

        dma.ld      ch0, own, x_src, tile_n0, zero, zero, zero, zero, zero, zero
        sync.signal dma0, OWN_SEND
        sync.signal dma0, OWN_ADD

        barrier 0                       # every core runs before any remote write

        sync.wait   dma1, OWN_SEND
        #           ch   core  sem        dst   src  n0      n1  dst_s1  src_s1
        dma.send    ch1, next, RECV_FULL, recv, own, row_n0, tr, row_n0, row_n0

        sync.wait   vec, OWN_ADD
        sync.wait   vec, RECV_FULL
        v.add       f32, full, recv, own, recv, tr, tc_n
        sync.signal vec, SUM_DONE

        sync.wait   dma0, SUM_DONE
        dma.st      ch0, y_dst, recv, tile_n0, zero, zero, zero, zero, zero, zero
        halt
