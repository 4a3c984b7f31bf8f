// `lowbit bench moe`: the fused INT4 MoE layer (int4::fused_moe: routing, align, GEMM1 +
// silu*up, GEMM2 * routing weight, top-k sum) on Qwen3-30B-A3B (TP1, TP2), Mixtral-8x7B and
// DeepSeek-V2-Lite shapes, G=128. Baseline in the same run: cuBLAS bf16/fp16 GEMMs looped
// over the experts the routing touches, with the actual per-expert token counts (GEMM1 and
// GEMM2 only; the gather/activation/sum are left out, which favours cuBLAS). Floor: bytes
// of the touched experts' int4 weights + scales (+ zeros) + x + y over the copy bandwidth
// measured in this run. #wrong: elements of the last token's output that differ from an
// fp64 CPU reference (on the same dequantized weights) by more than 2^-6|ref| + 1e-2 rms.
// Built with -DLOWBIT_BENCH_VLLM_MARLIN=ON, every row also times vLLM's fused_marlin_moe steps on
// the same experts (converted exactly; bench/baselines/vllm_marlin.h): marlin_gemm_us (its two
// Marlin GEMMs alone, a lower bound of vLLM's layer) and marlin_layer_us (with lowbit's routing
// and the silu_and_mul / top-k sum kernels of the baseline), checked against the same reference.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/gpu_timing.cuh"
#include "bench/int4/bench_int4_util.cuh"
#include "lowbit/int4/shard.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/moe_cpu_ref.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"
#ifdef LOWBIT_HAVE_VLLM_MARLIN
#include "bench/baselines/vllm_marlin.h"
#endif
#ifdef LOWBIT_INT4_TRACE
#include <cstdlib>

#include "kernels/int4/internal.h"
#endif

namespace lowbit::int4 {
namespace {

using namespace bench_util;
using lowbit::bench::fmt;

struct MoeShape {
  std::string name;
  int E, H, I, topk;
};

int run_bench_moe(const std::vector<std::string>& argv) {
  cli::Args args(argv, {"m", "out", "dtype", "group", "reps", "path", "shapes", "layout", "block-m", "routing"},
                 {"quick", "asym", "act-order", "act-order-fold", "help"});
  if (!args.ok() || args.has("help")) {
    if (!args.ok()) std::fprintf(stderr, "bench moe: %s\n", args.error().c_str());
    std::fprintf(stderr,
                 "usage: lowbit bench moe [--m 1,8,16,32,128,512,2048,8192] [--quick] [--shapes qwen3-30b-a3b.tp1,...]\n"
                 "       (--shapes also takes any layer as ExHxIxTOPK: experts x hidden x one rank's intermediate x\n"
                 "       top-k, e.g. 128x4096x1536x8)\n"
                 "       [--path auto,fused,grouped] [--layout auto|npacked] [--dtype bf16|fp16] [--group 32|64|128|-1]\n"
                 "       [--asym] [--block-m 0|8|16|32|64|128] [--routing logits|caller] [--act-order | --act-order-fold]\n"
                 "       [--reps 10]\n"
                 "       [--out docs/benchmarks/moe]\n");
    return args.ok() ? 0 : 2;
  }
  CommonOptions opt;
  if (!read_common_options("bench moe", args, {"1", "16", "128", "2048"},
                           {"1", "8", "16", "32", "128", "512", "2048", "8192"}, "docs/benchmarks/moe", &opt))
    return 2;
  const bool sym = opt.sym;
  std::vector<int> ms = opt.ms;
  const DType act = opt.act;
  const int group = opt.group, reps = opt.reps;
  // --block-m: the align block (MoeArgs::block_m) of the fused path; 0 = fused_moe's choice.
  const int block_m = static_cast<int>(args.get_int("block-m", 0));
  const std::string out = opt.out;
  // --path auto,fused,grouped: one row per path. auto = what an eager call takes at that M
  // (moe_auto_path). The fused path is timed in a CUDA graph; the grouped path synchronizes
  // once per call (host reads the per-expert counts), cannot be captured, and is timed with
  // eager launches (events around `copies` back-to-back calls; host launch cost included).
  // --layout auto|npacked: the experts' kernel layout (auto: the shape's default, MMA-tiled
  // for these shapes; npacked: the same random words read as N-packed, the skinny MoE tile).
  const std::string layout = args.get("layout", "auto");
  // --routing logits|caller: fused_moe routes the logits (softmax top-k inside the layer), or
  // takes the same top-k as the caller's ids and weights (MoeArgs::topk_ids / topk_weights, as
  // engines with their own routing call it; vLLM's layer then aligns those ids instead of
  // routing, too). Same ids, weights and reference either way.
  const std::string routing = args.get("routing", "logits");
  if (routing != "logits" && routing != "caller") {
    std::fprintf(stderr, "bench moe: unknown --routing %s (logits, caller)\n", routing.c_str());
    return 2;
  }
  const bool caller_routing = routing == "caller";
  // --act-order: every expert of w13 and w2 carries a random input permutation (k_perm, as a
  // desc_act GPTQ checkpoint's): fused_moe gathers x and the intermediate per routed pair
  // (kernels.h); the reference applies the permutations. Marlin columns and the grouped path
  // are left out (the grouped path refuses act-order experts).
  // --act-order-fold: the same, with w2's permutation folded into w13's columns (act_order_fold.h;
  // lowbit convert --fold-act-order): w13 keeps its k_perm, w2 has none, so only x is gathered. The
  // experts are random words either way, so folded w13 columns are timed as any others.
  const bool act_order_fold = args.has("act-order-fold");
  if (act_order_fold && opt.act_order) {
    std::fprintf(stderr, "bench moe: --act-order and --act-order-fold exclude each other\n");
    return 2;
  }
  const bool act_order = opt.act_order || act_order_fold;
  if (layout != "auto" && layout != "npacked") {
    std::fprintf(stderr, "bench moe: unknown --layout %s (auto, npacked)\n", layout.c_str());
    return 2;
  }
  std::vector<std::string> path_names = args.get_list("path", {"auto"});
  for (const std::string& p : path_names)
    if (p != "auto" && p != "fused" && p != "grouped") {
      std::fprintf(stderr, "bench moe: unknown --path %s (auto, fused, grouped)\n", p.c_str());
      return 2;
    }
  if (!args.ok()) {
    std::fprintf(stderr, "bench moe: %s\n", args.error().c_str());
    return 2;
  }
  // The issue's four, then the spec's Qwen3.5-35B-A3B and DeepSeek-V2-Lite at TP 2, whose w2
  // shard (I = 704 rows, 5.5 groups of 128) runs at the finer group shard_k gives it (below).
  std::vector<MoeShape> shapes = {{"qwen3-30b-a3b.tp1", 128, 2048, 768, 8},
                                  {"qwen3-30b-a3b.tp2", 128, 2048, 384, 8},
                                  {"mixtral-8x7b", 8, 4096, 14336, 2},
                                  {"deepseek-v2-lite", 64, 2048, 1408, 6},
                                  {"qwen3.5-35b-a3b", 256, 2048, 512, 8},
                                  {"deepseek-v2-lite.tp2", 64, 2048, 704, 6}};
  // --shapes also takes any layer as ExHxIxTOPK (experts, hidden size, one rank's intermediate size,
  // top-k; e.g. 128x4096x1536x8), so that a model's own layer can be measured beside the catalog's.
  // Refused here, before the GPU, where fused_moe would refuse it (check_layer in fused_moe.cu) or
  // the group does not divide H (w2's K = I may cut groups: it takes shard_group_size's, below).
  const std::vector<std::string> picked = args.get_list("shapes", {});
  for (const std::string& name : picked) {
    int e = 0, h = 0, inter = 0, k = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "%dx%dx%dx%d%c", &e, &h, &inter, &k, &tail) != 4) continue;
    const bool sizes = h >= 32 && h <= (1 << 16) && h % 32 == 0 && inter >= 32 && inter <= (1 << 16) && inter % 32 == 0;
    if (e < 1 || e > 1024 || k < 1 || k > 32 || k > e || !sizes || (group > 0 && h % group != 0)) {
      std::fprintf(stderr,
                   "bench moe: --shapes %s: wants E within 1..1024, top-k within 1..min(32, E), H and I multiples of 32 "
                   "up to %d, and H a multiple of the group (%d)\n",
                   name.c_str(), 1 << 16, group);
      return 2;
    }
    shapes.push_back({name, e, h, inter, k});  // select_shapes keeps only the picked ones
  }
  if (std::string bad; !select_shapes(picked, &shapes, &bad)) {
    std::fprintf(stderr, "bench moe: unknown --shapes %s\n", bad.c_str());
    return 2;
  }
  double copy_gbps = 0;
  double read_gbps = 0;  // %rdbw's yardstick; the floor stays the issue's (the copy bandwidth)
  Status st = lowbit::bench::measure_copy_bandwidth(0, size_t{1} << 30, &copy_gbps);
  if (st.ok()) st = lowbit::bench::measure_read_bandwidth(0, size_t{1} << 30, &read_gbps);
  if (!st.ok()) {
    std::fprintf(stderr, "bench moe: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("# %s\n# copy bandwidth %.0f GB/s (read-only stream %.0f GB/s); %s, G=%d, %s, routing %s%s; times are "
              "CUDA-graph medians\n",
              lowbit::bench::machine_description().c_str(), copy_gbps, read_gbps, dtype_name(act), group,
              sym ? "sym" : "asym", routing.c_str(),
              act_order_fold ? ", act-order experts, w2's permutation folded into w13 (k_perm on w13 only)"
              : act_order    ? ", act-order experts (k_perm)"
                             : "");
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench moe: cublasCreate failed\n");
    return 1;
  }
  cudaStream_t stream;
  LOWBIT_BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasSetStream(handle, stream);

  std::vector<lowbit::bench::Table::Column> columns = {
      {"shape", 18}, {"layout", 9}, {"path", 7},    {"M", 6},         {"experts", 7}, {"time_us", 10}, {"TFLOP/s", 8},
      {"TB/s", 6},   {"%floor", 7}, {"%rdbw", 6},   {"cublas_us", 10}, {"speedup", 8}, {"#wrong", 7}};
#ifdef LOWBIT_HAVE_VLLM_MARLIN
  // vLLM's fused_marlin_moe beside it: its two GEMMs alone (mgemm_us) and the layer (mlayer_us);
  // x_mgemm / x_mlayer = those over time_us (> 1: lowbit faster); #wrong_m as #wrong.
  namespace vm = lowbit::bench::vllm_marlin;
  for (lowbit::bench::Table::Column c : {lowbit::bench::Table::Column{"mgemm_us", 9}, {"mlayer_us", 10}, {"x_mgemm", 8},
                                         {"x_mlayer", 8}, {"bm", 3}, {"#wrong_m", 8}})
    columns.push_back(c);
  std::printf("# mgemm_us / mlayer_us: %s, fused_marlin_moe's GEMMs / layer\n", vm::kMarlinSource);
#endif
  lowbit::bench::Table table(columns);
  table.print_header();
  nlohmann::json rows = nlohmann::json::array();
  int total_wrong = 0;
  for (const MoeShape& sh : shapes) {
    // w2's K is the TP shard's I: where a group of the checkpoint straddles it, the shard
    // carries the group size shard_k gives it (shard.h, exact: the scales repeat; gcd(G, I) for
    // every rank), and so its scale bytes, which the floor counts. The weights here are random
    // at that group size.
    const int group2 = shard_group_size(group, 0, sh.I);
    if (group2 != group) std::printf("# %s: w2 at G=%d (a TP shard of G=%d weights: I=%d)\n", sh.name.c_str(), group2, group, sh.I);
    WeightShape s13{sh.E, 2 * sh.I, sh.H, group, sym, act}, s2{sh.E, sh.H, sh.I, group2, sym, act};
    const float sc13 = 0.5f / std::sqrt(static_cast<float>(sh.H)), sc2 = 2.0f / std::sqrt(static_cast<float>(sh.I));
    std::vector<std::unique_ptr<DevInt4>> w13, w2;
    // One copy of the int4 experts (w13 and w2) on the device; false, said by name, when the GPU
    // has no room for it (a --shapes layer can ask for any size).
    auto add_copy = [&](int c) {
      w13.push_back(std::make_unique<DevInt4>(s13, 11u + 31u * c, sc13));
      w2.push_back(std::make_unique<DevInt4>(s2, 12u + 31u * c, sc2));
      if (w13.back()->ok() && w2.back()->ok()) return true;
      std::fprintf(stderr, "bench moe: out of GPU memory for %s's int4 experts (copy %d, %.2f GB each)\n",
                   sh.name.c_str(), c, (w13.back()->bytes + w2.back()->bytes) / 1e9);
      return false;
    };
    if (!add_copy(0)) return 1;
    const size_t per_expert = (w13[0]->bytes + w2[0]->bytes) / sh.E;
    const int copies = rotation_copies(per_expert * std::min(sh.E, sh.topk), 8);
    for (int c = 1; c < copies; ++c)
      if (!add_copy(c)) return 1;
    if (layout == "npacked")
      for (auto* v : {&w13, &w2})
        for (auto& d : *v) d->view.kind = KernelLayoutKind::kNPackedInterleaved;
    // --act-order: one random permutation per expert and stack, shared by the copies.
    std::vector<int32_t> perm13, perm2;
    DevBuf dperm13, dperm2;
    if (act_order) {
      std::mt19937 prng(99u + sh.E);
      perm13 = testing::random_k_perm(sh.E, sh.H, prng);
      perm2 = testing::random_k_perm(sh.E, sh.I, prng);
      dperm13 = upload(perm13);
      dperm2 = upload(perm2);
      for (auto& d : w13) d->view.k_perm = dperm13.as<int32_t>();
      if (!act_order_fold)
        for (auto& d : w2) d->view.k_perm = dperm2.as<int32_t>();
    }
    const char* layout_name = kernel_layout_name(w13[0]->view.kind);
#ifdef LOWBIT_HAVE_VLLM_MARLIN
    // Marlin's copies of the experts, copy 0 converted from lowbit's copy 0.
    std::vector<vm::Weights> mw13, mw2;
    Status msup = vm::supported(s13);
    if (msup.ok()) msup = vm::supported(s2);
    if (act_order) msup = make_status(StatusCode::kNotSupported, "--act-order (the wrapper takes no g_idx)");
    if (!msup.ok() || w13[0]->view.kind != KernelLayoutKind::kMmaTiled) {
      std::printf("# %s: no Marlin columns: %s\n", sh.name.c_str(), msup.ok() ? "not MMA-tiled" : msup.to_string().c_str());
    } else {
      LOWBIT_BENCH_CUDA(cudaDeviceSynchronize());  // the fills ran on the default stream
      st = vm::make_copies(w13[0]->view, copies, stream, &mw13);
      if (st.ok()) st = vm::make_copies(w2[0]->view, copies, stream, &mw2);
      if (!st.ok()) {
        std::fprintf(stderr, "bench moe: vLLM Marlin experts for %s: %s\n", sh.name.c_str(), st.to_string().c_str());
        return 1;
      }
    }
    vm::Workspace mws;
#endif
    const size_t b13 = static_cast<size_t>(sh.E) * 2 * sh.I * sh.H * 2, b2 = static_cast<size_t>(sh.E) * sh.H * sh.I * 2;
    const int bcopies = rotation_copies((b13 + b2) / sh.E * std::min(sh.E, sh.topk), 4);
    std::vector<DevBuf> f13, f2;
    LOWBIT_BENCH_CUDA(cudaDeviceSynchronize());  // fills ran on the default stream; `stream` does not wait for it
    for (int c = 0; c < bcopies; ++c) {
      f13.emplace_back(b13);
      f2.emplace_back(b2);
      if (!f13.back().p || !f2.back().p) {
        std::fprintf(stderr, "bench moe: out of memory for %s\n", sh.name.c_str());
        return 1;
      }
      st = dequantize(stored_order(w13[c % copies]->view), f13.back().as<uint16_t>(), stream);
      if (st.ok()) st = dequantize(stored_order(w2[c % copies]->view), f2.back().as<uint16_t>(), stream);
      if (!st.ok()) {
        std::fprintf(stderr, "bench moe: %s\n", st.to_string().c_str());
        return 1;
      }
    }
    for (int m : ms) {
      std::mt19937 rng(1234u + m);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> logits(static_cast<size_t>(m) * sh.E);
      for (auto& v : logits) v = nd(rng);
      std::vector<int32_t> ids;
      std::vector<float> rw;
      testing::cpu_topk(logits, m, sh.E, sh.topk, true, &ids, &rw);
      std::vector<int> count(sh.E, 0);
      for (int id : ids) ++count[id];
      int touched = 0;
      for (int c : count) touched += c > 0;
      const int P = m * sh.topk;
      DevBuf dl = upload(logits), x(static_cast<size_t>(m) * sh.H * 2), y(static_cast<size_t>(m) * sh.H * 2);
      DevBuf dids = upload(ids), drw = upload(rw);  // --routing caller: the layer's top-k, given
      fill_act(x.p, static_cast<size_t>(m) * sh.H, 5u + m, act, 0.1f, 1.f);
      // cuBLAS buffers: tokens already grouped by expert (gather not timed).
      DevBuf bx(static_cast<size_t>(P) * sh.H * 2), bh(static_cast<size_t>(P) * 2 * sh.I * 2),
          ba(static_cast<size_t>(P) * sh.I * 2), by(static_cast<size_t>(P) * sh.H * 2);
      fill_act(bx.p, static_cast<size_t>(P) * sh.H, 7u, act, 0.1f, 1.f);
      fill_act(ba.p, static_cast<size_t>(P) * sh.I, 8u, act, 0.1f, 1.f);
      LOWBIT_BENCH_CUDA(cudaDeviceSynchronize());  // fills (default stream) before `stream` uses them
      int bcall = 0;
      auto run_cublas = [&](cudaStream_t s) -> Status {
        const int c = bcall++ % bcopies;
        size_t row = 0;
        for (int e = 0; e < sh.E; ++e) {
          if (!count[e]) continue;
          const char* w1 = f13[c].as<char>() + static_cast<size_t>(e) * 2 * sh.I * sh.H * 2;
          const char* w2p = f2[c].as<char>() + static_cast<size_t>(e) * sh.H * sh.I * 2;
          if (cublas_gemm(handle, act, count[e], 2 * sh.I, sh.H, bx.as<char>() + row * sh.H * 2, w1,
                          bh.as<char>() + row * 2 * sh.I * 2) != CUBLAS_STATUS_SUCCESS ||
              cublas_gemm(handle, act, count[e], sh.H, sh.I, ba.as<char>() + row * sh.I * 2, w2p,
                          by.as<char>() + row * sh.H * 2) != CUBLAS_STATUS_SUCCESS)
            return make_status(StatusCode::kInternal, "cublasGemmEx failed (expert %d)", e);
          row += count[e];
        }
        return Status::Ok();
      };
      lowbit::bench::Timing tb{};
      bool have_tb = false;
#ifdef LOWBIT_HAVE_VLLM_MARLIN
      // fused_marlin_moe's buffers and routing (lowbit's moe_route at vLLM's block size).
      const int mbm = vm::moe_block_size(m, sh.topk, sh.E);
      const long long mmaxp = moe_max_padded(m, sh.topk, sh.E, mbm);
      DevBuf m_ids(static_cast<size_t>(P) * 4), m_w(static_cast<size_t>(P) * 4), m_sorted(static_cast<size_t>(mmaxp) * 4),
          m_eids(static_cast<size_t>(mmaxp / mbm) * 4), m_npp(4), m_h(static_cast<size_t>(P) * 2 * sh.I * 2),
          m_a(static_cast<size_t>(P) * sh.I * 2), m_c(static_cast<size_t>(P) * sh.H * 2), m_y(static_cast<size_t>(m) * sh.H * 2);
      int mcall = 0;
      if (caller_routing)  // the caller's weights, read by Marlin's GEMM2
        LOWBIT_BENCH_CUDA(cudaMemcpy(m_w.p, drw.p, static_cast<size_t>(P) * 4, cudaMemcpyDeviceToDevice));
      auto marlin_route = [&](cudaStream_t s) {
        if (caller_routing)  // vLLM with the caller's topk_ids: moe_align_block_size only
          return moe_align(dids.as<int32_t>(), m, sh.topk, sh.E, mbm, m_sorted.as<int32_t>(), m_eids.as<int32_t>(),
                           m_npp.as<int32_t>(), s);
        return moe_route(dl.as<float>(), m, sh.E, sh.topk, true, mbm, m_ids.as<int32_t>(), m_w.as<float>(),
                         m_sorted.as<int32_t>(), m_eids.as<int32_t>(), m_npp.as<int32_t>(), s);
      };
      // GEMM1 (x -> h, rows p / topk) and GEMM2 (a -> c, routing weights multiplied in) on copy c.
      auto marlin_g1 = [&](cudaStream_t s, int c) {
        return vm::moe_gemm(mw13[c], x.p, m_h.p, m_sorted.as<int32_t>(), m_eids.as<int32_t>(), m_npp.as<int32_t>(),
                            m_w.as<float>(), mbm, sh.topk, false, m, mmaxp, mws, s);
      };
      auto marlin_g2 = [&](cudaStream_t s, int c) {
        return vm::moe_gemm(mw2[c], m_a.p, m_c.p, m_sorted.as<int32_t>(), m_eids.as<int32_t>(), m_npp.as<int32_t>(),
                            m_w.as<float>(), mbm, 1, true, P, mmaxp, mws, s);
      };
      auto marlin_layer = [&](cudaStream_t s) -> Status {
        const int c = mcall++ % static_cast<int>(mw13.size());
        Status r = marlin_route(s);
        if (r.ok()) r = marlin_g1(s, c);
        if (r.ok()) r = vm::silu_and_mul(act, m_h.p, m_a.p, P, sh.I, s);
        if (r.ok()) r = marlin_g2(s, c);
        if (r.ok()) r = vm::topk_sum(act, m_c.p, m_y.p, m, sh.topk, sh.H, s);
        return r;
      };
      // The two Marlin GEMMs alone, back to back (routing and silu_and_mul left out: a lower
      // bound of vLLM's layer; GEMM2 reads the intermediate the last layer call left).
      auto marlin_gemm_only = [&](cudaStream_t s) -> Status {
        const int c = mcall++ % static_cast<int>(mw13.size());
        Status r = marlin_g1(s, c);
        if (r.ok()) r = marlin_g2(s, c);
        return r;
      };
      lowbit::bench::Timing tmg{}, tml{};
      bool have_tm = false;
      int marlin_wrong = -1;
      if (!mw13.empty()) {
        st = mws.ensure_moe(mmaxp, mbm, std::max(2 * sh.I, sh.H), stream);
        if (!st.ok()) {
          std::fprintf(stderr, "bench moe: vLLM Marlin workspace: %s\n", st.to_string().c_str());
          return 1;
        }
      }
#endif
      for (const std::string& pname : path_names) {
        MoePath path = pname == "fused"     ? MoePath::kFused
                       : pname == "grouped" ? MoePath::kGrouped
                                            : moe_auto_path(m, sh.topk, sh.E, sh.H, sh.I, w13[0]->view.kind);
        if (act_order && pname == "grouped") {
          std::printf("# %s M=%d: no grouped row with --act-order (the path refuses act-order experts)\n", sh.name.c_str(), m);
          continue;
        }
        if (act_order) path = MoePath::kFused;  // what fused_moe runs for act-order experts at any M
        size_t wsb = 0;
        (void)moe_workspace_size(w13[0]->view, w2[0]->view, m, sh.topk, block_m, &wsb, path);
        DevBuf work(wsb);
        int call = 0;
        MoeArgs layer;
        layer.x = x.p;
        layer.router_logits = caller_routing ? nullptr : dl.as<float>();
        layer.topk_ids = caller_routing ? dids.as<int32_t>() : nullptr;
        layer.topk_weights = caller_routing ? drw.as<float>() : nullptr;
        layer.y = y.p;
        layer.m = m;
        layer.topk = sh.topk;
        layer.renormalize = true;
        layer.path = path;
        layer.block_m = block_m;
        auto run_int4 = [&](cudaStream_t s) {
          const int c = call++ % copies;
          return fused_moe(layer, w13[c]->view, w2[c]->view, work.p, wsb, s);
        };
        st = run_int4(stream);  // copy 0, checked below
        LOWBIT_BENCH_CUDA(cudaStreamSynchronize(stream));
        int wrong = -1;
        if (st.ok()) {
          // fp64 reference for the last token on copy 0's dequantized weights (rounded to the
          // activation dtype, as dequantize() stores them). The MMA-tiled kernels multiply the
          // unrounded weights s * (q - z) in fp32, so each element's bound adds that difference
          // (relative u_w per weight): 6 u_w * sqrt(sum of squared terms) for each dot product,
          // carried through silu * up (derivative bounds) and the intermediate's own rounding
          // (one ulp), then through the second GEMM (as test_gemm.cu states it for one GEMM).
          const int tm = m - 1;
          auto xm = download<uint16_t>(x.as<uint16_t>() + static_cast<size_t>(tm) * sh.H, sh.H);
          auto ym = download<uint16_t>(y.as<uint16_t>() + static_cast<size_t>(tm) * sh.H, sh.H);
          const bool unrounded = w13[0]->view.kind == KernelLayoutKind::kMmaTiled;
          const double uw = unrounded ? (act == DType::kBF16 ? 0x1p-9 : 0x1p-12) : 0.0;
          const double ulp_a = act == DType::kBF16 ? 0x1p-8 : 0x1p-11;
          std::vector<double> ref(sh.H, 0.0), a(sh.I), da(sh.I), extra(sh.H, 0.0);
          for (int s = 0; s < sh.topk; ++s) {
            const int e = ids[static_cast<size_t>(tm) * sh.topk + s];
            auto W1 = download<uint16_t>(f13[0].as<uint16_t>() + static_cast<size_t>(e) * 2 * sh.I * sh.H,
                                         static_cast<size_t>(2) * sh.I * sh.H);
            auto W2 = download<uint16_t>(f2[0].as<uint16_t>() + static_cast<size_t>(e) * sh.H * sh.I,
                                         static_cast<size_t>(sh.H) * sh.I);
            // Stored row k of expert e takes input perm[e][k] (--act-order), else input k.
            const int32_t* p13 = act_order ? perm13.data() + static_cast<size_t>(e) * sh.H : nullptr;
            const int32_t* p2 = act_order && !act_order_fold ? perm2.data() + static_cast<size_t>(e) * sh.I : nullptr;
            std::vector<float> xf(sh.H);
            for (int k = 0; k < sh.H; ++k) xf[k] = half_bits_to_float(act, xm[p13 ? p13[k] : k]);
            for (int n = 0; n < sh.I; ++n) {
              double g = 0, u = 0, g2 = 0, u2 = 0;
              const uint16_t* rg = W1.data() + static_cast<size_t>(n) * sh.H;
              const uint16_t* ru = W1.data() + static_cast<size_t>(sh.I + n) * sh.H;
              for (int k = 0; k < sh.H; ++k) {
                const double tg = static_cast<double>(xf[k]) * half_bits_to_float(act, rg[k]);
                const double tu = static_cast<double>(xf[k]) * half_bits_to_float(act, ru[k]);
                g += tg, u += tu, g2 += tg * tg, u2 += tu * tu;
              }
              const double sig = 1 / (1 + std::exp(-g)), silu = g * sig;
              a[n] = half_bits_to_float(act, float_to_half_bits(act, static_cast<float>(silu * u)));
              // |d silu / dg| <= 1.1; the intermediate may round the other way: one ulp.
              da[n] = unrounded ? 1.1 * std::fabs(u) * 6 * uw * std::sqrt(g2) + std::fabs(silu) * 6 * uw * std::sqrt(u2) +
                                      ulp_a * std::fabs(a[n])
                                : 0.0;
            }
            const double wsl = rw[static_cast<size_t>(tm) * sh.topk + s];
            for (int h = 0; h < sh.H; ++h) {
              double o = 0, o2 = 0, e1 = 0;
              const uint16_t* r2 = W2.data() + static_cast<size_t>(h) * sh.I;
              for (int n = 0; n < sh.I; ++n) {
                const int in = p2 ? p2[n] : n;
                const double w = half_bits_to_float(act, r2[n]);
                o += a[in] * w, o2 += a[in] * w * a[in] * w, e1 += da[in] * std::fabs(w);
              }
              ref[h] += wsl * o;
              extra[h] += wsl * (e1 + 6 * uw * std::sqrt(o2));
            }
          }
          double r2 = 0;
          for (double v : ref) r2 += v * v;
          const double rms = std::sqrt(r2 / sh.H);
          // Elements of a last-token output row outside the bound (all of them if ref is zero).
          auto count_wrong = [&](const std::vector<uint16_t>& out) {
            int n = rms == 0 ? sh.H : 0;
            for (int h = 0; h < sh.H; ++h) {
              const double g = half_bits_to_float(act, out[h]);
              if (!(std::fabs(g - ref[h]) <= std::ldexp(std::fabs(ref[h]), -6) + 1e-2 * rms + extra[h])) ++n;
            }
            return n;
          };
          wrong = count_wrong(ym);
          total_wrong += wrong;
#ifdef LOWBIT_HAVE_VLLM_MARLIN
          if (!mw13.empty() && marlin_wrong < 0) {
            // vLLM's layer on copy 0, its last token against the same reference and bound (its
            // intermediate h is rounded before silu, ours is not: within the 2^-6 |ref| term).
            mcall = 0;
            st = marlin_layer(stream);
            LOWBIT_BENCH_CUDA(cudaStreamSynchronize(stream));
            if (st.ok()) {
              marlin_wrong = count_wrong(download<uint16_t>(m_y.as<uint16_t>() + static_cast<size_t>(tm) * sh.H, sh.H));
              total_wrong += marlin_wrong;
            }
          }
#endif
        }
        lowbit::bench::Timing t4{};
        if (st.ok() && path == MoePath::kGrouped) {
          // Eager: 2 warm-up calls, then `reps` samples of `copies` back-to-back calls.
          for (int i = 0; i < 2 && st.ok(); ++i) st = run_int4(stream);
          cudaEvent_t e0, e1;
          LOWBIT_BENCH_CUDA(cudaEventCreate(&e0));
          LOWBIT_BENCH_CUDA(cudaEventCreate(&e1));
          std::vector<double> us;
          for (int r = 0; r < reps && st.ok(); ++r) {
            LOWBIT_BENCH_CUDA(cudaEventRecord(e0, stream));
            for (int i = 0; i < copies && st.ok(); ++i) st = run_int4(stream);
            LOWBIT_BENCH_CUDA(cudaEventRecord(e1, stream));
            LOWBIT_BENCH_CUDA(cudaEventSynchronize(e1));
            float ms = 0;
            LOWBIT_BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
            us.push_back(1000.0 * ms / copies);
          }
          cudaEventDestroy(e0);
          cudaEventDestroy(e1);
          if (st.ok()) {
            std::sort(us.begin(), us.end());
            t4.median_us = us[us.size() / 2];
            t4.min_us = us.front();
          }
        } else if (st.ok()) {
          st = lowbit::bench::time_in_graph(stream, run_int4, copies, 2, reps, &t4);
        }
        // What the timed calls ran, resolved once outside the timing: the graph-timed calls were
        // captured, where kAuto runs the fused path (kernels.h), which kFused names here.
        MoeResolved resolved;
        if (st.ok()) {
          MoeArgs ra = layer;
          if (path != MoePath::kGrouped) ra.path = MoePath::kFused;
          st = moe_resolved(ra, w13[0]->view, w2[0]->view, wsb, stream, &resolved);
        }
#ifdef LOWBIT_INT4_TRACE
        if (const char* tp = std::getenv("LOWBIT_INT4_TRACE_OUT"); tp != nullptr && st.ok())
          detail::moe_trace_dump((std::string(tp) + "_" + sh.name + "_m" + std::to_string(m) + ".csv").c_str());
#endif
        if (st.ok() && !have_tb) {
          st = lowbit::bench::time_in_graph(stream, run_cublas, bcopies, 2, reps, &tb);
          have_tb = st.ok();
        }
#ifdef LOWBIT_HAVE_VLLM_MARLIN
        if (st.ok() && !mw13.empty() && !have_tm && marlin_wrong >= 0) {
          const int mcopies = static_cast<int>(mw13.size());
          mcall = 0;
          st = marlin_route(stream);  // the routing the GEMM-only graph reads
          if (st.ok()) st = lowbit::bench::time_in_graph(stream, marlin_gemm_only, mcopies, 2, reps, &tmg);
          mcall = 0;
          if (st.ok()) st = lowbit::bench::time_in_graph(stream, marlin_layer, mcopies, 2, reps, &tml);
          have_tm = st.ok();
        }
#endif
        if (!st.ok()) {
          std::fprintf(stderr, "bench moe: %s M=%d path %s: %s\n", sh.name.c_str(), m, moe_path_name(path), st.to_string().c_str());
          return 1;
        }
        const double flops = 6.0 * P * sh.H * sh.I;
        const double bytes = static_cast<double>(per_expert) * touched + 4.0 * m * sh.H;
        const double floor_us = bytes / (copy_gbps * 1e3);
        const double tflops = flops / (t4.median_us * 1e6), tbs = bytes / (t4.median_us * 1e6);
        const double pct = 100.0 * floor_us / t4.median_us, speedup = tb.median_us / t4.median_us;
        const double rdbw = 100.0 * tbs * 1e3 / read_gbps;  // share of the read-only stream's bandwidth
        std::vector<std::string> cells = {sh.name,        layout_name,       moe_path_name(path), std::to_string(m),
                                          std::to_string(touched), fmt(t4.median_us, 1), fmt(tflops, 1),
                                          fmt(tbs, 2),    fmt(pct, 1),       fmt(rdbw, 1),        fmt(tb.median_us, 1),
                                          fmt(speedup, 2), std::to_string(wrong)};
#ifdef LOWBIT_HAVE_VLLM_MARLIN
        for (const std::string& v :
             {have_tm ? fmt(tmg.median_us, 1) : std::string("-"), have_tm ? fmt(tml.median_us, 1) : std::string("-"),
              have_tm ? fmt(tmg.median_us / t4.median_us, 2) : std::string("-"),
              have_tm ? fmt(tml.median_us / t4.median_us, 2) : std::string("-"),
              mw13.empty() ? std::string("-") : std::to_string(mbm),
              mw13.empty() ? std::string("-") : std::to_string(marlin_wrong)})
          cells.push_back(v);
#endif
        table.print_row(cells);
        rows.push_back({{"shape", sh.name}, {"layout", layout_name}, {"path", moe_path_name(path)}, {"timing", path == MoePath::kGrouped ? "eager" : "graph"},
                        {"M", m}, {"E", sh.E}, {"H", sh.H}, {"I", sh.I}, {"topk", sh.topk},
                        {"experts_touched", touched}, {"time_us", t4.median_us}, {"min_us", t4.min_us},
                        {"tflops", tflops}, {"tbps", tbs}, {"pct_floor", pct}, {"floor_us", floor_us},
                        {"pct_read_bw", rdbw}, {"cublas_us", tb.median_us}, {"cublas_tflops", flops / (tb.median_us * 1e6)}, {"speedup", speedup},
                        {"wrong", wrong}, {"dtype", dtype_name(act)}, {"group", group}, {"group_w2", group2}, {"sym", sym},
                        {"routing", routing}, {"act_order", act_order}, {"act_order_fold", act_order_fold},
                        {"resolved_path", moe_path_name(resolved.path)}, {"block_m", resolved.block_m},
                        {"single_token", resolved.single_token}, {"gemm1_tile", moe_tile_name(resolved.gemm1)},
                        {"gemm2_tile", moe_tile_name(resolved.gemm2)}});
#ifdef LOWBIT_HAVE_VLLM_MARLIN
        if (have_tm) {
          rows.back()["marlin_gemm_us"] = tmg.median_us;
          rows.back()["marlin_layer_us"] = tml.median_us;
          rows.back()["x_marlin_gemm"] = tmg.median_us / t4.median_us;
          rows.back()["x_marlin_layer"] = tml.median_us / t4.median_us;
          rows.back()["marlin_block_m"] = mbm;
          rows.back()["marlin_wrong"] = marlin_wrong;
          rows.back()["marlin_layer_pct_floor"] = 100.0 * floor_us / tml.median_us;
        }
#endif
      }
    }
  }
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  nlohmann::json rec = lowbit::bench::run_record(argv, "bench moe");
  rec["copy_gbps"] = copy_gbps;
  rec["read_gbps"] = read_gbps;
  rec["rdbw"] = "%rdbw (pct_read_bw): TB/s over the read-only stream bandwidth read_gbps";
  rec["floor"] = "bytes(touched experts' int4 weights + scales (+zeros) + x + y) / copy bandwidth";
  // One panel per path when several were asked for (as bench gemm).
  nlohmann::json plot = {{"x", "M"},      {"y", "pct_floor"}, {"series", "shape"}, {"logx", true},
                         {"logy", false}, {"title", "int4 fused MoE: % of memory floor"}};
#ifdef LOWBIT_HAVE_VLLM_MARLIN
  rec["marlin"] = std::string(vm::kMarlinSource) +
                  ": fused_marlin_moe's steps on the same experts (uint4b8, permuted scales, vLLM's block size rule); "
                  "marlin_gemm_us = its two Marlin GEMMs alone, marlin_layer_us = lowbit's moe_route (--routing "
                  "caller: moe_align of the given ids) + GEMM1 + silu_and_mul + GEMM2 + top-k sum; x_marlin_* = "
                  "those over time_us";
  plot["y"] = "x_marlin_gemm";
  plot["title"] = "vLLM Marlin MoE GEMMs alone / lowbit layer (> 1: lowbit faster)";
#endif
  if (path_names.size() > 1) plot["facet"] = "path";
  lowbit::bench::write_results(out, rec, rows, table.markdown(), plot);
  std::printf("# total #wrong: %d\n", total_wrong);
  return total_wrong == 0 ? 0 : 3;
}

}  // namespace
}  // namespace lowbit::int4

LOWBIT_REGISTER_COMMAND("bench moe",
                        "INT4 fused MoE vs cuBLAS grouped GEMMs and the memory floor (--m 1,8,..., --quick, --out PREFIX)",
                        lowbit::int4::run_bench_moe);
