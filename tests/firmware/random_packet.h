// Random valid packets and packet streams for the property tests and the fuzz
// seeds, and rings to decode them from.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "npusim/firmware/packets.h"

namespace npu::firmware::testing {

// A packet of the given kind. Half of its field values sit at the edges of the
// field's valid range (its ends, their neighbours, the 32-bit word boundary),
// the others anywhere in it.
Packet random_packet(const PacketSpec& spec, std::mt19937_64& rng);

// A packet of a random kind.
Packet random_packet(std::mt19937_64& rng);

// The packets' words, one after another.
std::vector<uint32_t> encode_all(const std::vector<Packet>& packets);

// A ring of ring_size words holding `words` from word `head` on, wrapping at
// the end; the other words are random, so that a decoder reading past its
// packet would see garbage rather than zeros.
std::vector<uint32_t> place_in_ring(const std::vector<uint32_t>& words, size_t ring_size, size_t head, std::mt19937_64& rng);

}  // namespace npu::firmware::testing
