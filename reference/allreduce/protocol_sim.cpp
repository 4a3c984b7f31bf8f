#include "reference/allreduce/protocol_sim.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace lowbit::allreduce {

namespace {

using proto::StepCodec;

// Encode n (<= ts) values as one tile segment of ts elements (codec_math.h layout; groups
// past n are left as they are: decoders never read them).
void encode_tile(StepCodec c, DType t, const uint16_t* x, size_t n, size_t ts, uint8_t* dst) {
  if (proto::step_is_raw(c)) {
    std::memcpy(dst, x, n * 2);
    return;
  }
  codec::CodecSpec spec{c.bits, c.group};
  const size_t G = static_cast<size_t>(c.group);
  uint8_t* meta = dst + codec::codec_data_bytes(spec, ts);
  for (size_t g = 0; g * G < n; ++g) {
    const uint16_t* xg = x + g * G;
    size_t m = n - g * G < G ? n - g * G : G;
    uint32_t kmin = 0xFFFFFFFFu, kmax = 0;
    bool finite = true;
    for (size_t i = 0; i < m; ++i) {
      if (half_bits_nonfinite(t, xg[i])) finite = false;
      uint32_t k = proto::half_order_key(xg[i]);
      kmin = k < kmin ? k : kmin;
      kmax = k > kmax ? k : kmax;
    }
    codec::GroupMeta gm = codec::make_group_meta(spec, t, proto::half_from_order_key(kmin),
                                                 proto::half_from_order_key(kmax), finite);
    uint8_t* d = dst + g * codec::codec_group_data_bytes(spec);
    std::memset(d, 0, codec::codec_group_data_bytes(spec));
    for (size_t i = 0; i < m; ++i) {
      uint32_t q = codec::quantize_value(spec, gm, half_bits_to_float(t, xg[i]));
      if (c.bits == 8) {
        d[i] = static_cast<uint8_t>(q);
      } else {
        size_t w = i / 8;
        int slot = codec::kInt4Slot[i % 8];
        d[w * 4 + slot / 2] |= static_cast<uint8_t>(q << (4 * (slot % 2)));
      }
    }
    meta[4 * g + 0] = static_cast<uint8_t>(gm.scale_bits & 0xFF);
    meta[4 * g + 1] = static_cast<uint8_t>(gm.scale_bits >> 8);
    meta[4 * g + 2] = static_cast<uint8_t>(gm.min_bits & 0xFF);
    meta[4 * g + 3] = static_cast<uint8_t>(gm.min_bits >> 8);
  }
}

// The status to report from a set of blocks or ranks: the timeout that names the missing
// peer, not an "aborted" one from a block that stopped because another timed out first
// (which one gets there first depends on scheduling); else the first error; else Ok.
Status root_cause(const std::vector<Status>& all) {
  for (const Status& s : all)
    if (!s.ok() && s.message().find("never arrived") != std::string::npos) return s;
  for (const Status& s : all)
    if (!s.ok()) return s;
  return Status::Ok();
}

// Decoded fp32 value of element i of a tile segment.
float decode_at(StepCodec c, DType t, const uint8_t* src, size_t ts, size_t i) {
  if (proto::step_is_raw(c)) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    return half_bits_to_float(t, h);
  }
  codec::CodecSpec spec{c.bits, c.group};
  size_t g = i / static_cast<size_t>(c.group), e = i % static_cast<size_t>(c.group);
  const uint8_t* meta = src + codec::codec_data_bytes(spec, ts) + 4 * g;
  codec::GroupMeta gm = codec::load_group_meta(t, static_cast<uint16_t>(meta[0] | (meta[1] << 8)),
                                               static_cast<uint16_t>(meta[2] | (meta[3] << 8)));
  const uint8_t* d = src + g * codec::codec_group_data_bytes(spec);
  uint32_t q;
  if (c.bits == 8) {
    q = d[e];
  } else {
    int slot = codec::kInt4Slot[e % 8];
    q = (d[(e / 8) * 4 + slot / 2] >> (4 * (slot % 2))) & 0xFu;
  }
  return codec::dequantize_value(t, gm, q);
}

}  // namespace

ProtocolSim::ProtocolSim(int nranks, size_t buffer_bytes, int tiles, int timeout_ms)
    : nranks_(nranks), tiles_(tiles), timeout_ms_(timeout_ms), areas_(proto::make_areas(buffer_bytes)) {
  ranks_.resize(static_cast<size_t>(nranks));
  for (auto& r : ranks_) {
    r.mem.assign(areas_.total_bytes, 0);
    r.ctl.reset(new std::atomic<uint64_t>[proto::kControlWords]);
    for (size_t i = 0; i < proto::kControlWords; ++i) r.ctl[i].store(0);
  }
}

bool ProtocolSim::wait_flag(int rank, size_t index, uint64_t epoch, int peer, int step, size_t chunk, Status* st) {
  auto& ctl = ranks_[static_cast<size_t>(rank)].ctl;
  auto t0 = std::chrono::steady_clock::now();
  while (ctl[index].load(std::memory_order_acquire) < epoch) {
    if (ctl[proto::kAbortIndex].load(std::memory_order_relaxed) != 0) {
      *st = make_status(StatusCode::kTimeout, "rank %d: aborted (another block timed out)", rank);
      return false;
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(timeout_ms_)) {
      ctl[proto::kAbortIndex].store(1);
      *st = make_status(StatusCode::kTimeout, "rank %d: peer rank %d never arrived at step %d (chunk %zu) within %d ms",
                        rank, peer, step, chunk, timeout_ms_);
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// LL one-shot block (allreduce_protocol.h): 16-byte lines {d0, f, d1, f}, each 8-byte half
// stored and loaded as one atomic u64 (the GPU's single-copy-atomic 8-byte halves).
bool ProtocolSim::run_ll(int rank, int tile, const proto::Plan& p, DType dtype, const uint16_t* in, uint16_t* out,
                         uint64_t base, Status* st) {
  const int N = nranks_;
  const uint64_t e = proto::chunk_epoch(base, 0);
  const uint32_t f = proto::ll_flag(e);
  const size_t n = p.count;
  const proto::LineRange lr = proto::ll_tile_lines(n, p.tiles, tile);
  auto line_words = [&](size_t i, uint32_t* d0, uint32_t* d1) {
    uint16_t h[4];
    for (size_t k = 0; k < 4; ++k) h[k] = i * 4 + k < n ? in[i * 4 + k] : 0;
    *d0 = h[0] | (static_cast<uint32_t>(h[1]) << 16);
    *d1 = h[2] | (static_cast<uint32_t>(h[3]) << 16);
  };
  auto half_at = [&](Rank& r, size_t off) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(r.mem.data() + off));
  };
  for (size_t i = lr.begin; i < lr.end; ++i) {
    uint32_t d0, d1;
    line_words(i, &d0, &d1);
    for (int j = 1; j < N; ++j) {
      const int peer = (rank + j) % N;
      const size_t off = proto::ll_line_offset(areas_, N, e, rank, i);
      Rank& pr = ranks_[static_cast<size_t>(peer)];
      half_at(pr, off).store(d0 | (static_cast<uint64_t>(f) << 32), std::memory_order_release);
      half_at(pr, off + 8).store(d1 | (static_cast<uint64_t>(f) << 32), std::memory_order_release);
    }
  }
  Rank& me = ranks_[static_cast<size_t>(rank)];
  for (size_t i = lr.begin; i < lr.end; ++i) {
    float acc[4] = {0, 0, 0, 0};
    for (int r = 0; r < N; ++r) {
      uint32_t d0, d1;
      if (r == rank) {
        line_words(i, &d0, &d1);
      } else {
        const size_t off = proto::ll_line_offset(areas_, N, e, r, i);
        auto t0 = std::chrono::steady_clock::now();
        uint64_t h0, h1;
        while (true) {
          h0 = half_at(me, off).load(std::memory_order_acquire);
          h1 = half_at(me, off + 8).load(std::memory_order_acquire);
          if ((h0 >> 32) == f && (h1 >> 32) == f) break;
          if (me.ctl[proto::kAbortIndex].load(std::memory_order_relaxed) != 0) {
            *st = make_status(StatusCode::kTimeout, "rank %d: aborted (another block timed out)", rank);
            return false;
          }
          if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(timeout_ms_)) {
            me.ctl[proto::kAbortIndex].store(1);
            *st = make_status(StatusCode::kTimeout,
                              "rank %d: peer rank %d never arrived at step %d (chunk 0, LL line %zu) within %d ms", rank,
                              r, proto::kStepOneShot, i, timeout_ms_);
            return false;
          }
          std::this_thread::yield();
        }
        d0 = static_cast<uint32_t>(h0);
        d1 = static_cast<uint32_t>(h1);
      }
      const uint32_t w[2] = {d0, d1};
      for (int k = 0; k < 4; ++k) {
        const float x = half_bits_to_float(dtype, static_cast<uint16_t>(w[k / 2] >> (16 * (k % 2))));
        acc[k] = r == 0 ? x : acc[k] + x;
      }
    }
    for (size_t k = 0; k < 4 && i * 4 + k < n; ++k) out[i * 4 + k] = proto::round_output(dtype, acc[k]);
  }
  return true;
}

// Split two-step (allreduce_protocol.h): per chunk, three "kernels" of kSimSplitBlocks
// blocks (threads, joined between kernels: stream order); per-rank flags raised by the last
// block of steps 1 and 2 to arrive; the last block of step 3 advances the epoch base.
namespace {
constexpr int kSimSplitBlocks = 3;
}
void ProtocolSim::run_split_rank(int rank, const proto::Plan& p, DType dtype, const uint16_t* in, uint16_t* out,
                                 Status* st) {
  Rank& me = ranks_[static_cast<size_t>(rank)];
  const int N = nranks_, B = kSimSplitBlocks;
  auto arrive = [&](size_t count_index, size_t flag_idx, uint64_t e) {
    if (me.ctl[count_index].fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint64_t>(B)) {
      me.ctl[count_index].store(0, std::memory_order_relaxed);
      for (int q = 0; q < N; ++q) ranks_[static_cast<size_t>(q)].ctl[flag_idx].store(e, std::memory_order_release);
    }
  };
  auto launch = [&](const std::function<void(int, Status*)>& block) {
    std::vector<Status> bs(static_cast<size_t>(B));
    std::vector<std::thread> th;
    for (int b = 0; b < B; ++b) th.emplace_back([&, b] { block(b, &bs[static_cast<size_t>(b)]); });
    for (auto& t : th) t.join();
    return root_cause(bs);
  };
  for (size_t c = 0; c < p.num_chunks; ++c) {
    const uint64_t base = me.ctl[proto::kSeqBaseIndex].load(std::memory_order_relaxed);
    const uint64_t e = proto::chunk_epoch(base, 0);
    // Step 1: (slice, tile) items round-robin over the blocks, peers' slices first.
    *st = launch([&](int b, Status*) {
      for (int w = b; w < N * p.tiles; w += B) send_tile(rank, (rank + 1 + w / p.tiles) % N, w % p.tiles, c, p, dtype, in);
      arrive(proto::kSplitCount1Index, proto::flag1_index(0, rank), e);
    });
    if (!st->ok()) return;
    // Step 2: wait for every sender, then my slice's tiles.
    *st = launch([&](int b, Status* bst) {
      for (int r = 0; r < N; ++r)
        if (!wait_flag(rank, proto::flag1_index(0, r), e, r, proto::kStepReduceScatter, c, bst)) return;
      std::vector<uint16_t> tmp(p.ts);
      for (int t = b; t < p.tiles; t += B) reduce_tile(rank, t, c, p, dtype, tmp.data());
      arrive(proto::kSplitCount2Index, proto::flag2_index(0, rank), e);
    });
    if (!st->ok()) return;
    // Step 3: wait for every owner, decode; the last block advances the base.
    *st = launch([&](int b, Status* bst) {
      for (int r = 0; r < N; ++r)
        if (!wait_flag(rank, proto::flag2_index(0, r), e, r, proto::kStepAllGather, c, bst)) return;
      for (int w = b; w < N * p.tiles; w += B) gather_tile(rank, w / p.tiles, w % p.tiles, c, p, dtype, out);
      if (me.ctl[proto::kDoneIndex].fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint64_t>(B)) {
        me.ctl[proto::kDoneIndex].store(0, std::memory_order_relaxed);
        me.ctl[proto::kSeqBaseIndex].store(base + 1, std::memory_order_relaxed);
      }
    });
    if (!st->ok()) return;
  }
}

void ProtocolSim::send_tile(int rank, int j, int t, size_t c, const proto::Plan& p, DType dtype, const uint16_t* in) {
  const proto::Span sp = proto::tile_span(p, c, j, t);
  Rank& owner = ranks_[static_cast<size_t>(j)];
  encode_tile(p.c1, dtype, in + sp.begin, sp.n, p.ts, owner.mem.data() + proto::recv_offset(areas_, p, rank, t));
}

void ProtocolSim::reduce_tile(int rank, int t, size_t c, const proto::Plan& p, DType dtype, uint16_t* tmp) {
  const Rank& me = ranks_[static_cast<size_t>(rank)];
  const proto::Span mine = proto::tile_span(p, c, rank, t);
  for (size_t i = 0; i < mine.n; ++i) {
    float sum = 0;
    for (int r = 0; r < nranks_; ++r) {
      const float v = decode_at(p.c1, dtype, me.mem.data() + proto::recv_offset(areas_, p, r, t), p.ts, i);
      sum = r == 0 ? v : sum + v;
    }
    tmp[i] = proto::round_output(dtype, sum);
  }
  for (int j = 0; j < nranks_; ++j) {
    Rank& dst = ranks_[static_cast<size_t>(j)];
    encode_tile(p.c2, dtype, tmp, mine.n, p.ts, dst.mem.data() + proto::gather_offset(areas_, p, rank, t));
  }
}

void ProtocolSim::gather_tile(int rank, int j, int t, size_t c, const proto::Plan& p, DType dtype, uint16_t* out) {
  const Rank& me = ranks_[static_cast<size_t>(rank)];
  const proto::Span sp = proto::tile_span(p, c, j, t);
  const uint8_t* src = me.mem.data() + proto::gather_offset(areas_, p, j, t);
  for (size_t i = 0; i < sp.n; ++i) out[sp.begin + i] = proto::round_output(dtype, decode_at(p.c2, dtype, src, p.ts, i));
}

void ProtocolSim::run_block(int rank, int tile, const proto::Plan& p, DType dtype, const uint16_t* in, uint16_t* out,
                            Status* st) {
  Rank& me = ranks_[static_cast<size_t>(rank)];
  const int N = nranks_;
  const uint64_t base = me.ctl[proto::kSeqBaseIndex].load(std::memory_order_relaxed);
  std::vector<uint16_t> tmp(p.ts);
  if (p.kind == proto::Kind::kOneShotLL && p.num_chunks == 1 && !run_ll(rank, tile, p, dtype, in, out, base, st)) return;
  for (size_t c = 0; c < p.num_chunks && p.kind != proto::Kind::kOneShotLL; ++c) {
    const uint64_t e = proto::chunk_epoch(base, c);
    if (p.kind == proto::Kind::kOneShot) {
      proto::Span sp = proto::oneshot_span(p, c, tile);
      for (int j = 0; j < N; ++j) {
        Rank& peer = ranks_[static_cast<size_t>(j)];
        std::memcpy(peer.mem.data() + proto::oneshot_offset(areas_, p, e, rank, tile), in + sp.begin, sp.n * 2);
        peer.ctl[proto::flag1_index(tile, rank)].store(e, std::memory_order_release);
      }
      for (int j = 0; j < N; ++j) {
        if (!wait_flag(rank, proto::flag1_index(tile, j), e, j, proto::kStepOneShot, c, st)) return;
      }
      for (size_t i = 0; i < sp.n; ++i) {
        float s = 0;
        for (int j = 0; j < N; ++j) {
          float v = decode_at(p.c1, dtype, me.mem.data() + proto::oneshot_offset(areas_, p, e, j, tile), p.ts, i);
          s = j == 0 ? v : s + v;
        }
        out[sp.begin + i] = proto::round_output(dtype, s);
      }
      continue;
    }
    // Step 1: encode my tile of every slice j into rank j's recv slot for me.
    for (int j = 0; j < N; ++j) {
      send_tile(rank, j, tile, c, p, dtype, in);
      ranks_[static_cast<size_t>(j)].ctl[proto::flag1_index(tile, rank)].store(e, std::memory_order_release);
    }
    // Step 2: reduce my slice's tile from every sender, encode once, send to every rank.
    for (int r = 0; r < N; ++r) {
      if (!wait_flag(rank, proto::flag1_index(tile, r), e, r, proto::kStepReduceScatter, c, st)) return;
    }
    reduce_tile(rank, tile, c, p, dtype, tmp.data());
    for (int j = 0; j < N; ++j)
      ranks_[static_cast<size_t>(j)].ctl[proto::flag2_index(tile, rank)].store(e, std::memory_order_release);
    // Step 3: decode every owner's reduced tile.
    for (int j = 0; j < N; ++j) {
      if (!wait_flag(rank, proto::flag2_index(tile, j), e, j, proto::kStepAllGather, c, st)) return;
      gather_tile(rank, j, tile, c, p, dtype, out);
    }
  }
  // The last block of this rank to finish advances the epoch base (as the kernel does).
  if (me.ctl[proto::kDoneIndex].fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint64_t>(p.tiles)) {
    me.ctl[proto::kDoneIndex].store(0, std::memory_order_relaxed);
    me.ctl[proto::kSeqBaseIndex].store(base + p.num_chunks, std::memory_order_relaxed);
  }
}

Status ProtocolSim::allreduce(Mode mode, int group_size, DType dtype, const std::vector<const uint16_t*>& inputs,
                              const std::vector<uint16_t*>& outputs, size_t n, const std::vector<bool>& present) {
  LOWBIT_CHECK_ARG(static_cast<int>(inputs.size()) == nranks_ && static_cast<int>(outputs.size()) == nranks_,
                   "sim: need %d inputs and outputs", nranks_);
  LOWBIT_CHECK_ARG(nranks_ >= 1 && nranks_ <= proto::kMaxRanks, "sim: %d ranks (1..%d)", nranks_, proto::kMaxRanks);
  LOWBIT_CHECK_ARG(mode != Mode::kAuto && mode != Mode::kNccl, "sim: mode %s has no protocol", mode_name(mode));
  if (n == 0) return Status::Ok();
  proto::StepCodec c1, c2;
  proto::Kind kind = mode == Mode::kOneShot ? proto::Kind::kOneShot : proto::Kind::kTwoStep;
  if (mode_is_quantized(mode)) {
    c1 = {step1_codec(mode, group_size).bits, group_size};
    c2 = {step2_codec(mode, group_size).bits, group_size};
    LOWBIT_CHECK_ARG(codec::codec_spec_valid(step1_codec(mode, group_size)), "sim: group size %d", group_size);
  }
  proto::Plan plan;
  if (kind == proto::Kind::kOneShot && n * 2 <= ll_max_bytes_ &&
      proto::make_plan(proto::Kind::kOneShotLL, c1, c2, nranks_, tiles_, n, areas_, &plan)) {
    kind = proto::Kind::kOneShotLL;
  } else if (!proto::make_plan(kind, c1, c2, nranks_, tiles_, n, areas_, &plan)) {
    return make_status(StatusCode::kInvalidArgument, "sim: buffer too small for %d tiles", tiles_);
  }
  if (mode_is_quantized(mode) && n * 2 >= split_min_bytes_) {
    plan.kind = proto::Kind::kTwoStepSplit;
    std::vector<Status> st(static_cast<size_t>(nranks_));
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks_; ++r) {
      if (!present.empty() && !present[static_cast<size_t>(r)]) continue;
      threads.emplace_back([&, r] {
        run_split_rank(r, plan, dtype, inputs[static_cast<size_t>(r)], outputs[static_cast<size_t>(r)],
                       &st[static_cast<size_t>(r)]);
      });
    }
    for (auto& th : threads) th.join();
    return root_cause(st);
  }
  // In place: every block reads its input span before writing the same span of the output,
  // so aliasing is safe exactly as on the GPU.
  std::vector<Status> st(static_cast<size_t>(nranks_) * static_cast<size_t>(plan.tiles));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks_; ++r) {
    if (!present.empty() && !present[static_cast<size_t>(r)]) continue;
    for (int t = 0; t < plan.tiles; ++t) {
      threads.emplace_back([&, r, t] {
        run_block(r, t, plan, dtype, inputs[static_cast<size_t>(r)], outputs[static_cast<size_t>(r)],
                  &st[static_cast<size_t>(r) * static_cast<size_t>(plan.tiles) + static_cast<size_t>(t)]);
      });
    }
  }
  for (auto& th : threads) th.join();
  return root_cause(st);
}

}  // namespace lowbit::allreduce
