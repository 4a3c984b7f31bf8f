// Flash All-Reduce wire protocol: how a message is cut into chunks, slices and tiles, where
// every piece lives in the per-rank staging buffer, which flags announce it, and which
// epoch values they carry. Shared by the CUDA kernels (kernels/allreduce/) and the CPU
// simulation (reference/allreduce/protocol_sim.*), so the two cannot drift.
//
// ---- Per-rank buffer (one device allocation, mapped on every peer) --------------------
//   [ control : kControlBytes ][ LL area ][ one-shot area ][ recv area ][ gather area ]
// control: flag1[kMaxTiles][kMaxRanks] u64  -- step 1 / one-shot arrival, written by peers
//          flag2[kMaxTiles][kMaxRanks] u64  -- step 2 arrival (reduced slice), by owners
//          local words (only this rank touches them): seq base, blocks-done counter,
//          abort word, error-claim word.
// LL area: 2 halves (epoch parity) x N sender slots of 16-byte lines with in-data flags.
// one-shot area: 2 halves (epoch parity) x N sender slots, raw 16-bit.
// recv area   : N sender slots; slot r holds sender r's encoded copy of my slice.
// gather area : N owner slots; slot j holds owner j's encoded reduced slice j.
// The recv/gather split is fixed (half/half) and independent of the call, which is what
// makes back-to-back calls with different sizes/modes safe (see "Reuse" below).
//
// ---- Geometry ----------------------------------------------------------------------
// T tiles (= kernel blocks) per chunk. A chunk of c_n elements is cut into N slices of
// S_c = round_up(ceil(c_n / N), U) elements (the last one(s) shorter or empty); slice j is
// owned by rank j. Tile t of a slice covers [t*ts, (t+1)*ts) of it. U = G for quantized
// modes (so groups never straddle slices, tiles or chunks: every boundary is a multiple of
// G from the start of the tensor) and 8 (16 bytes) for raw modes. The tile size ts is fixed
// for the whole call; in a slot, tile t is an independent encoded segment (codec_math.h
// layout) at byte offset t * tile_bytes, tile_bytes = round_up(encoded bytes(ts), 16).
//
// ---- Epochs -------------------------------------------------------------------------
// Every rank keeps a device-resident u64 `seq base` that only grows. Chunk c of a call
// uses epoch e = base + c + 1; the last block to finish the kernel stores base + chunks.
// Flags are written with e (release, system scope) and waited on with `flag >= e`
// (acquire). Nothing on the host counts calls, so a captured CUDA graph replays correctly.
// All ranks make the same sequence of calls, so their epochs agree.
//
// ---- Reuse (why no "buffer free" flags are needed) -------------------------------------
// Every tile of every chunk raises its flags, even when empty, and each block handles its
// tile sequentially, so a flag at epoch e from peer p's block t implies p's block t
// finished every read of epochs < e.
// - Two-step recv slot (I write p's recv slot at e): I already waited (step 3 at e-1, or
//   the whole previous call) for p's step-2 flags, raised after p read its recv slots.
// - Two-step gather slot (p writes mine at e): p waited for my step-1 flag at e, raised
//   after my step 3 of e-1 (or after my previous kernel completed).
// - One-shot slots: double buffered by epoch parity; writing half e%2 needs the peer done
//   with epoch e-2, implied by its flags at e-1 (this call or a previous one).
// - Across calls with a different layout: a rank that finished call k has seen flags of
//   every tile of every peer, so every peer finished call k-1 entirely; the one-shot,
//   recv and gather areas are disjoint, so the peer's possibly unfinished reads of call k
//   (gather area in step 3, or one-shot half) never overlap what call k+1 writes first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lowbit/detail/codec_math.h"
#include "lowbit/detail/hd.h"

namespace lowbit::allreduce::proto {

constexpr int kMaxRanks = 8;
constexpr int kMaxTiles = 132;  // >= SMs of an H200 (132)
constexpr int kRawBits = 16;    // "codec" of unquantized steps: the 16-bit values as they are
constexpr size_t kRawUnit = 8;  // elements: 16-byte vectors
// Tile segments inside a slot start at multiples of 16 bytes (tile bytes are rounded up):
// the quantized kernels load/store 8 elements' codes (4 or 8 bytes) per thread.
constexpr size_t kTileAlign = 16;

// Control block words (u64 indices).
constexpr size_t kFlag1Index = 0;
constexpr size_t kFlag2Index = kFlag1Index + static_cast<size_t>(kMaxTiles) * kMaxRanks;
constexpr size_t kSeqBaseIndex = kFlag2Index + static_cast<size_t>(kMaxTiles) * kMaxRanks;
constexpr size_t kDoneIndex = kSeqBaseIndex + 1;   // blocks finished in the current kernel
constexpr size_t kAbortIndex = kSeqBaseIndex + 2;  // nonzero: a block timed out, all exit
constexpr size_t kClaimIndex = kSeqBaseIndex + 3;  // first timed-out block writes the record
constexpr size_t kSplitCount1Index = kSeqBaseIndex + 4;  // split path: blocks done with step 1
constexpr size_t kSplitCount2Index = kSeqBaseIndex + 5;  // split path: blocks done with step 2
constexpr size_t kControlWords = kSeqBaseIndex + 6;
constexpr size_t kControlBytes = ((kControlWords * 8 + 4095) / 4096) * 4096;

LOWBIT_HD size_t flag1_index(int tile, int peer) { return kFlag1Index + static_cast<size_t>(tile) * kMaxRanks + peer; }
LOWBIT_HD size_t flag2_index(int tile, int peer) { return kFlag2Index + static_cast<size_t>(tile) * kMaxRanks + peer; }

// Codec of one step: bits 16 = raw 16-bit values.
struct StepCodec {
  int bits = kRawBits;
  int group = 128;
};
LOWBIT_HD bool step_is_raw(StepCodec c) { return c.bits == kRawBits; }
// Bytes of an encoded segment of n elements (n a multiple of the unit, except nothing else
// needs it: encoded sizes of partial groups are those of full groups).
LOWBIT_HD size_t step_bytes(StepCodec c, size_t n) {
  if (step_is_raw(c)) return n * 2;
  return codec::codec_encoded_bytes(codec::CodecSpec{c.bits, c.group}, n);
}

// Staging partition of `buffer_bytes` (excluding the control block). The LL area (one-shot
// with flags in the data, see "LL one-shot" below) is never written by anything else, so
// a stale line there always carries an older epoch than the call reading it.
struct Areas {
  size_t ll_offset, ll_bytes;            // from the start of the allocation
  size_t oneshot_offset, oneshot_bytes;
  size_t recv_offset, recv_bytes;
  size_t gather_offset, gather_bytes;
  size_t total_bytes;  // allocation size
};
LOWBIT_HD Areas make_areas(size_t buffer_bytes) {
  Areas a;
  size_t q = (buffer_bytes / 4) / 256 * 256;
  size_t half = ((buffer_bytes - q) / 2) / 256 * 256;
  a.ll_offset = kControlBytes;
  a.ll_bytes = (q / 2) / 256 * 256;
  a.oneshot_offset = a.ll_offset + a.ll_bytes;
  a.oneshot_bytes = q - a.ll_bytes;
  a.recv_offset = a.oneshot_offset + a.oneshot_bytes;
  a.recv_bytes = half;
  a.gather_offset = a.recv_offset + half;
  a.gather_bytes = half;
  a.total_bytes = a.gather_offset + half;
  return a;
}

// kTwoStepSplit: the two-step layout and semantics, run as three kernels per chunk (see
// "Split two-step" below).
enum class Kind : int { kOneShot = 0, kTwoStep = 1, kOneShotLL = 2, kTwoStepSplit = 3 };

// Everything a kernel (or the simulation) needs to know about one call.
struct Plan {
  Kind kind = Kind::kTwoStep;
  int nranks = 0;
  int tiles = 0;  // T = number of blocks
  StepCodec c1, c2;
  size_t unit = 0;        // U
  size_t count = 0;       // elements
  size_t chunk_full = 0;  // elements per full chunk
  size_t num_chunks = 0;
  size_t ts = 0;           // tile size (elements)
  size_t tile1_bytes = 0;  // one tile in a step-1 slot (one-shot: raw)
  size_t tile2_bytes = 0;  // one tile in a step-2 slot
  size_t slot1_bytes = 0;  // T * tile1_bytes
  size_t slot2_bytes = 0;
};

LOWBIT_HD size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
LOWBIT_HD size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

// ---- Split two-step (large quantized messages) ------------------------------------------
// The fused two-step kernel holds one block per SM for the whole call (its blocks spin on
// peers), which caps the encode/decode chains at 16 warps per SM. For large messages the
// three steps run instead as three kernels per chunk, each with as many warps as fit: step
// 1 (encode + push to the owners' recv slots), step 2 (wait, decode + sum + encode + push to
// every gather slot), step 3 (wait, decode into the output). Same slots, same bytes, same
// results as the fused kernel (the tiles only define the slot layout). Synchronization is
// per rank, not per tile: the last block of step 1 to finish (a counter in the control
// block) fences at system scope and raises flag1[tile 0][me] on every rank; step 2's blocks
// wait for flag1[0][r] >= e for every r, and the last one raises flag2[0][me]; step 3 waits
// for flag2[0][r] and its last block advances the epoch base by one (one epoch per chunk).
// Reuse is the fused path's argument with "every tile" replaced by "the whole kernel": a
// flag at epoch e from peer p means every block of p's kernel at e finished, hence every
// kernel of p before it. Flags only grow, so fused and split calls mix freely.

// ---- LL one-shot (small messages) -------------------------------------------------------
// Latency matters more than bytes below ~1 MiB, and the regular one-shot pays a system-scope
// fence plus a separate flag round trip per block. The LL variant (NCCL's "LL" protocol
// idea) puts the flag in the data: a 16-byte line {d0, f, d1, f} carries elements 4i..4i+3
// (d0: elements 4i, 4i+1; d1: 4i+2, 4i+3, little-endian 16-bit pairs) and f = the low 32
// bits of the call's epoch in both 8-byte halves. An 8-byte store is single-copy atomic,
// so a reader that sees f == epoch in a half also sees that half's data; it polls (bounded)
// until both halves carry the epoch. No fence, no flag word.
// Layout: 2 parity halves (epoch & 1) x N sender slots of ll_slot_bytes; line i of sender r
// at ll_line_offset. A call is LL only when it fits in one chunk (count <= ll_max_count).
// Reuse: as the regular one-shot (parity halves; consecutive calls differ in parity because
// an LL call is one chunk); a stale line holds an older epoch, hence never matches.
// Result: out = round(sum over ranks in rank order, fp32) -- the one-shot semantics.
constexpr size_t kLLLineBytes = 16;
constexpr size_t kLLLineElems = 4;
LOWBIT_HD size_t ll_slot_bytes(const Areas& a, int nranks) {
  return (a.ll_bytes / 2 / static_cast<size_t>(nranks)) / kLLLineBytes * kLLLineBytes;
}
LOWBIT_HD size_t ll_max_count(const Areas& a, int nranks) {
  return ll_slot_bytes(a, nranks) / kLLLineBytes * kLLLineElems;
}
LOWBIT_HD size_t ll_line_offset(const Areas& a, int nranks, uint64_t epoch, int sender, size_t line) {
  return a.ll_offset + static_cast<size_t>(epoch & 1) * (a.ll_bytes / 2) +
         static_cast<size_t>(sender) * ll_slot_bytes(a, nranks) + line * kLLLineBytes;
}
LOWBIT_HD uint32_t ll_flag(uint64_t epoch) { return static_cast<uint32_t>(epoch); }
// Lines of tile t when `count` elements are split over `tiles` blocks: [begin, end).
struct LineRange {
  size_t begin, end;
};
LOWBIT_HD LineRange ll_tile_lines(size_t count, int tiles, int tile) {
  const size_t lines = ceil_div(count, kLLLineElems);
  const size_t per = ceil_div(lines, static_cast<size_t>(tiles));
  size_t b = static_cast<size_t>(tile) * per, e = b + per;
  if (b > lines) b = lines;
  if (e > lines) e = lines;
  return LineRange{b, e};
}


// Returns false when the buffer cannot hold even one unit per tile (caller: fewer tiles
// or a larger buffer). tiles is reduced so that no tile is empty in a one-chunk call.
LOWBIT_HD bool make_plan(Kind kind, StepCodec c1, StepCodec c2, int nranks, int tiles, size_t count,
                         const Areas& areas, Plan* p) {
  p->kind = kind;
  p->nranks = nranks;
  if (kind == Kind::kOneShotLL) {  // one chunk of lines, or not LL at all
    if (count > ll_max_count(areas, nranks)) return false;
    const size_t lines = ceil_div(count, kLLLineElems);
    if (tiles < 1) tiles = 1;
    if (tiles > kMaxTiles) tiles = kMaxTiles;
    if (static_cast<size_t>(tiles) > lines) tiles = lines == 0 ? 1 : static_cast<int>(lines);
    p->c1 = p->c2 = StepCodec{};
    p->unit = kLLLineElems;
    p->count = count;
    p->tiles = tiles;
    p->num_chunks = count == 0 ? 0 : 1;
    p->ts = ceil_div(lines, static_cast<size_t>(tiles)) * kLLLineElems;
    p->chunk_full = count;
    p->tile1_bytes = p->tile2_bytes = p->slot1_bytes = p->slot2_bytes = 0;
    return true;
  }
  p->c1 = c1;
  p->c2 = kind == Kind::kOneShot ? StepCodec{} : c2;
  if (kind == Kind::kOneShot) p->c1 = StepCodec{};
  p->unit = (step_is_raw(p->c1) && step_is_raw(p->c2)) ? kRawUnit : static_cast<size_t>(c1.group);
  p->count = count;
  const size_t N = static_cast<size_t>(nranks), U = p->unit;
  if (tiles < 1) tiles = 1;
  if (tiles > kMaxTiles) tiles = kMaxTiles;
  // Per tile-unit bytes and the space each step's slots may use.
  size_t ts_max;
  if (kind == Kind::kOneShot) {
    // 2 parity halves x N slots x T tiles x ts x 2 bytes
    ts_max = areas.oneshot_bytes / (2 * N * static_cast<size_t>(tiles) * 2) / U * U;
  } else {
    // Each tile segment is padded to kTileAlign bytes (so every segment starts 16-byte
    // aligned and kernels can use vector loads/stores): reserve that padding first.
    const size_t nt = N * static_cast<size_t>(tiles);
    const size_t per_tile_r = areas.recv_bytes / nt, per_tile_g = areas.gather_bytes / nt;
    if (per_tile_r <= kTileAlign || per_tile_g <= kTileAlign) return false;
    size_t a = (per_tile_r - kTileAlign) / step_bytes(p->c1, U) * U;
    size_t b = (per_tile_g - kTileAlign) / step_bytes(p->c2, U) * U;
    ts_max = a < b ? a : b;
  }
  if (ts_max < U) return false;
  size_t per_chunk = kind == Kind::kOneShot ? static_cast<size_t>(tiles) * ts_max : N * tiles * ts_max;
  if (count <= per_chunk) {
    // One chunk: shrink the tile to the message and drop tiles that would be empty.
    size_t span = kind == Kind::kOneShot ? round_up(count, U) : round_up(ceil_div(count, N), U);
    if (span == 0) span = U;
    size_t units = span / U;
    if (static_cast<size_t>(tiles) > units) tiles = static_cast<int>(units);
    p->ts = round_up(ceil_div(span, static_cast<size_t>(tiles)), U);
    p->num_chunks = count == 0 ? 0 : 1;
    p->chunk_full = kind == Kind::kOneShot ? static_cast<size_t>(tiles) * p->ts : N * tiles * p->ts;
  } else {
    // Several chunks: balance them (shrink the tile so that all chunks are about equally
    // long) -- a short last chunk at full tile size would leave most blocks idle while the
    // rest take as long as for a full chunk. ts <= ts_max because count <= nc * per_chunk.
    const size_t nc = ceil_div(count, per_chunk);
    const size_t lanes = kind == Kind::kOneShot ? static_cast<size_t>(tiles) : N * tiles;
    p->ts = round_up(ceil_div(count, nc * lanes), U);
    if (p->ts > ts_max) p->ts = ts_max;
    p->chunk_full = lanes * p->ts;
    p->num_chunks = ceil_div(count, p->chunk_full);
  }
  p->tiles = tiles;
  p->tile1_bytes = round_up(step_bytes(p->c1, p->ts), kTileAlign);
  p->tile2_bytes = round_up(step_bytes(p->c2, p->ts), kTileAlign);
  p->slot1_bytes = p->tile1_bytes * static_cast<size_t>(tiles);
  p->slot2_bytes = p->tile2_bytes * static_cast<size_t>(tiles);
  return true;
}

// Chunk c: first element and element count.
LOWBIT_HD size_t chunk_begin(const Plan& p, size_t c) { return c * p.chunk_full; }
LOWBIT_HD size_t chunk_count(const Plan& p, size_t c) {
  size_t b = chunk_begin(p, c);
  size_t r = p.count - b;
  return r < p.chunk_full ? r : p.chunk_full;
}
// Slice length S_c (two-step): the stride between slices of chunk c.
LOWBIT_HD size_t slice_stride(const Plan& p, size_t c) {
  return round_up(ceil_div(chunk_count(p, c), static_cast<size_t>(p.nranks)), p.unit);
}

// A tile's piece of the tensor: [begin, begin + n) in elements (n may be 0).
struct Span {
  size_t begin;
  size_t n;
};
// Two-step: tile t of slice j of chunk c.
LOWBIT_HD Span tile_span(const Plan& p, size_t c, int slice, int tile) {
  size_t cn = chunk_count(p, c);
  size_t S = slice_stride(p, c);
  size_t lo = static_cast<size_t>(slice) * S + static_cast<size_t>(tile) * p.ts;
  size_t slice_end = (static_cast<size_t>(slice) + 1) * S;
  if (slice_end > cn) slice_end = cn;
  size_t hi = lo + p.ts;
  if (hi > slice_end) hi = slice_end;
  Span s;
  s.begin = chunk_begin(p, c) + lo;
  s.n = hi > lo ? hi - lo : 0;
  return s;
}
// One-shot: tile t of chunk c.
LOWBIT_HD Span oneshot_span(const Plan& p, size_t c, int tile) {
  size_t cn = chunk_count(p, c);
  size_t lo = static_cast<size_t>(tile) * p.ts;
  size_t hi = lo + p.ts;
  if (hi > cn) hi = cn;
  Span s;
  s.begin = chunk_begin(p, c) + lo;
  s.n = hi > lo ? hi - lo : 0;
  return s;
}

// Byte offsets (from the start of a rank's allocation).
// One-shot: sender r's copy of tile t at epoch e.
LOWBIT_HD size_t oneshot_offset(const Areas& a, const Plan& p, uint64_t epoch, int sender, int tile) {
  size_t half = a.oneshot_bytes / 2;
  return a.oneshot_offset + static_cast<size_t>(epoch & 1) * half + static_cast<size_t>(sender) * p.slot1_bytes +
         static_cast<size_t>(tile) * p.tile1_bytes;
}
// Two-step: my recv slot for sender r, tile t.
LOWBIT_HD size_t recv_offset(const Areas& a, const Plan& p, int sender, int tile) {
  return a.recv_offset + static_cast<size_t>(sender) * p.slot1_bytes + static_cast<size_t>(tile) * p.tile1_bytes;
}
// Two-step: my gather slot for owner j, tile t.
LOWBIT_HD size_t gather_offset(const Areas& a, const Plan& p, int owner, int tile) {
  return a.gather_offset + static_cast<size_t>(owner) * p.slot2_bytes + static_cast<size_t>(tile) * p.tile2_bytes;
}

// Epoch of chunk c given the seq base read at kernel start.
LOWBIT_HD uint64_t chunk_epoch(uint64_t base, size_t c) { return base + static_cast<uint64_t>(c) + 1; }

// Steps named in timeout reports.
constexpr int kStepOneShot = 0;
constexpr int kStepReduceScatter = 1;
constexpr int kStepAllGather = 2;

// Host-mapped error record written by the first block that times out.
struct ErrorRecord {
  int32_t set;  // 0 or 1, written last
  int32_t rank;
  int32_t peer;
  int32_t step;
  int64_t chunk;
  int32_t tile;
  int32_t pad;
};

// fp32 -> output dtype for every sum and decoded value of the all-reduce. NaN becomes the
// positive canonical NaN: the GPU's fp32 add returns a sign-less canonical NaN while the
// host propagates the NaN operand's sign, so the sign of a NaN is not part of the contract.
LOWBIT_HD uint16_t round_output(DType t, float v) {
  if (v != v) return t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
  return float_to_half_bits(t, v);
}

// Total order of 16-bit float bit patterns (-0 < +0), used for a group's min/max so that
// every implementation picks the same stored min bits whatever its reduction order.
LOWBIT_HD uint32_t half_order_key(uint16_t h) {
  return (h & 0x8000u) ? static_cast<uint32_t>(~h & 0xFFFFu) : static_cast<uint32_t>(h | 0x8000u);
}
LOWBIT_HD uint16_t half_from_order_key(uint32_t k) {
  return (k & 0x8000u) ? static_cast<uint16_t>(k & 0x7FFFu) : static_cast<uint16_t>(~k & 0xFFFFu);
}

}  // namespace lowbit::allreduce::proto
