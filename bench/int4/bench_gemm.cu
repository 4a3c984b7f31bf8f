// `lowbit bench gemm`: dense W4A16 GEMM (int4::gemm) on Llama-3 8B/70B projections against
// cuBLAS bf16/fp16 on the same (dequantized) weights and against the memory floor
// (int4 weights + scales (+ zeros) + x + y over the copy bandwidth measured in this run).
// CUDA-graph timing; weight copies rotated so that replays stream from HBM. #wrong: output
// elements of sampled rows that differ from the cuBLAS result on the dequantized weights
// by more than 2^-6 |ref| + 1e-2 rms(ref) (both accumulate in fp32; orders differ).
// Built with -DLOWBIT_BENCH_VLLM_MARLIN=ON, every row also times vLLM's Marlin kernel on the same
// weights (converted exactly; bench/baselines/vllm_marlin.h), checked against cuBLAS likewise;
// with -DLOWBIT_BENCH_VLLM_MACHETE=ON, vLLM's Machete (its first choice on Hopper;
// bench/baselines/vllm_machete.h) the same way.
#include <cublas_v2.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/gpu_timing.cuh"
#include "bench/int4/bench_int4_util.cuh"
#include "tests/cpu/int4/random_weights.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"
#ifdef LOWBIT_HAVE_VLLM_MARLIN
#include "bench/baselines/vllm_marlin.h"
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
#include "bench/baselines/vllm_machete.h"
#endif
#ifdef LOWBIT_INT4_TRACE
#include <cstdlib>

#include "kernels/int4/internal.h"
#endif

namespace lowbit::int4 {
namespace {

using namespace bench_util;
using lowbit::bench::fmt;

struct DenseShape {
  std::string name;
  int n, k;
};

// Output elements of rows 0..7 and the last 8 rows of y that differ from yref by more than
// 2^-6 |ref| + 1e-2 rms(ref); an all-zero reference counts every element.
int count_wrong(DType act, int m, int n, const void* y, const void* yref) {
  const int rows_chk = m < 8 ? m : 8;
  std::vector<uint16_t> a, b;
  for (int part = 0; part < 2; ++part) {
    const int r0 = part == 0 ? 0 : m - rows_chk;
    auto ya = download<uint16_t>(static_cast<const uint16_t*>(y) + static_cast<size_t>(r0) * n, size_t(rows_chk) * n);
    auto yb = download<uint16_t>(static_cast<const uint16_t*>(yref) + static_cast<size_t>(r0) * n, size_t(rows_chk) * n);
    a.insert(a.end(), ya.begin(), ya.end());
    b.insert(b.end(), yb.begin(), yb.end());
  }
  double r2 = 0;
  for (uint16_t v : b) r2 += std::pow(half_bits_to_float(act, v), 2);
  const double rms = std::sqrt(r2 / b.size());
  int wrong = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double ga = half_bits_to_float(act, a[i]), gb = half_bits_to_float(act, b[i]);
    if (!(std::fabs(ga - gb) <= std::ldexp(std::fabs(gb), -6) + 1e-2 * rms)) ++wrong;
  }
  if (rms == 0) wrong = static_cast<int>(a.size());  // an all-zero result is a failure
  return wrong;
}

int run_bench_gemm(const std::vector<std::string>& argv) {
  cli::Args args(argv, {"m", "out", "dtype", "group", "reps", "shapes", "path", "layout", "cooldown-ms"},
                 {"quick", "asym", "act-order", "help"});
  if (!args.ok() || args.has("help")) {
    if (!args.ok()) std::fprintf(stderr, "bench gemm: %s\n", args.error().c_str());
    std::fprintf(stderr,
                 "usage: lowbit bench gemm [--m 1,8,16,32,128,512,2048,8192] [--quick] [--shapes llama3-8b.qkv,...]\n"
                 "       [--path auto,skinny,tiled,cublas,pipelined] [--layout auto,npacked] [--dtype bf16|fp16]\n"
                 "       [--group 32|64|128|-1] [--asym] [--act-order] [--reps 10] [--cooldown-ms 2000] [--out docs/benchmarks/gemm]\n"
                 "  --shapes also takes one TP rank's share of Llama-3-70B: llama3-70b.tp{2,4,8}.{qkv,o,gate_up,down},\n"
                 "  and any weight as NxK (N output features x K input features, e.g. 2048x4096)\n");
    return args.ok() ? 0 : 2;
  }
  CommonOptions opt;
  if (!read_common_options("bench gemm", args, {"1", "16", "256", "4096"},
                           {"1", "8", "16", "32", "128", "512", "2048", "8192"}, "docs/benchmarks/gemm", &opt))
    return 2;
  const bool quick = opt.quick, sym = opt.sym;
  std::vector<int> ms = opt.ms;
  const DType act = opt.act;
  const int group = opt.group, reps = opt.reps;
  const std::string out = opt.out;
  // --act-order: the weights carry a random input permutation (k_perm, as a desc_act GPTQ
  // layer's): gemm() gathers x[:, k_perm] into its workspace first, and the times include that.
  // The cuBLAS reference and baseline run on the permuted x (gathered on the host, untimed); no
  // Marlin or Machete columns (the wrappers take no g_idx).
  const bool act_order = opt.act_order;
  // --cooldown-ms: idle time before timing a shape, or a row of M <= 512, after rows of
  // M >= 2048 (their cuBLAS and int4 GEMMs draw full power; the small-M rows right after them
  // ran up to 32% slower than in a run of small M alone: session 19, round IE).
  const int cooldown_ms = static_cast<int>(args.get_int("cooldown-ms", 2000));
  bool heavy_before = false;
  auto cool_down = [&] {
    if (heavy_before && cooldown_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cooldown_ms));
    heavy_before = false;
  };
  // --path auto,skinny,tiled,cublas,pipelined: one row per path (forced; skinny only up to M = 512,
  // pipelined only on the MMA-tiled layout).
  std::vector<GemmPath> paths;
  for (const std::string& p : args.get_list("path", {"auto"})) {
    GemmPath g = GemmPath::kAuto;
    for (GemmPath c : {GemmPath::kAuto, GemmPath::kSkinny, GemmPath::kTiled, GemmPath::kDequantCublas, GemmPath::kPipelined})
      if (p == gemm_path_name(c)) g = c;
    if (p != gemm_path_name(g)) {
      std::fprintf(stderr, "bench gemm: unknown --path %s (auto, skinny, tiled, cublas, pipelined)\n", p.c_str());
      return 2;
    }
    paths.push_back(g);
  }
  // --layout auto,npacked: auto = the dense default (MMA-tiled); npacked = the same random
  // words read as N-packed (the previous decode kernel), for side-by-side rows.
  std::vector<std::string> layouts = args.get_list("layout", {"auto"});
  for (const std::string& l : layouts)
    if (l != "auto" && l != "npacked") {
      std::fprintf(stderr, "bench gemm: unknown --layout %s (auto, npacked)\n", l.c_str());
      return 2;
    }
  if (!args.ok()) {
    std::fprintf(stderr, "bench gemm: %s\n", args.error().c_str());
    return 2;
  }
  std::vector<DenseShape> shapes = {{"llama3-8b.qkv", 6144, 4096},     {"llama3-8b.o", 4096, 4096},
                                    {"llama3-8b.gate_up", 28672, 4096}, {"llama3-8b.down", 4096, 14336},
                                    {"llama3-70b.qkv", 10240, 8192},    {"llama3-70b.o", 8192, 8192},
                                    {"llama3-70b.gate_up", 57344, 8192}, {"llama3-70b.down", 8192, 28672}};
  if (quick) shapes = {shapes[1], shapes[2], shapes[3], shapes[6]};
  // --shapes may also name one tensor-parallel rank's share of Llama-3-70B (not in the default
  // run): llama3-70b.tp{2,4,8}.{qkv,o,gate_up,down}, qkv / gate_up split by columns, o / down by
  // rows (shard.h's rules; every K stays a multiple of 128, so the groups are the checkpoint's).
  std::vector<DenseShape> catalog = shapes;
  for (const auto& [tp, tag] : {std::pair{2, "tp2"}, std::pair{4, "tp4"}, std::pair{8, "tp8"}})
    for (const DenseShape& b : {DenseShape{"qkv", 10240 / tp, 8192}, DenseShape{"o", 8192, 8192 / tp},
                                DenseShape{"gate_up", 57344 / tp, 8192}, DenseShape{"down", 8192, 28672 / tp}})
      catalog.push_back({std::string("llama3-70b.") + tag + "." + b.name, b.n, b.k});
  const std::vector<std::string> picked = args.get_list("shapes", {});
  // --shapes also takes any weight as NxK (output features x input features, e.g. 2048x4096), so
  // that a model's own projections can be measured beside the catalog's.
  for (const std::string& name : picked) {
    int n = 0, k = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "%dx%d%c", &n, &k, &tail) != 2) continue;
    if (n < 1 || k < 2 || n > (1 << 20) || k > (1 << 20) || k % 2 != 0 || (group > 0 && k % group != 0)) {
      std::fprintf(stderr, "bench gemm: --shapes %s: N must be within 1..%d and K an even multiple of the group (%d) up to %d\n",
                   name.c_str(), 1 << 20, group, 1 << 20);
      return 2;
    }
    catalog.push_back({name, n, k});
  }
  if (!picked.empty()) shapes = catalog;
  if (std::string bad; !select_shapes(picked, &shapes, &bad)) {
    std::fprintf(stderr, "bench gemm: unknown --shapes %s\n", bad.c_str());
    return 2;
  }

  double copy_gbps = 0;
  double read_gbps = 0;  // %rdbw's yardstick; the floor stays the issue's (the copy bandwidth)
  Status st = lowbit::bench::measure_copy_bandwidth(0, size_t{1} << 30, &copy_gbps);
  if (st.ok()) st = lowbit::bench::measure_read_bandwidth(0, size_t{1} << 30, &read_gbps);
  if (!st.ok()) {
    std::fprintf(stderr, "bench gemm: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("# %s\n# copy bandwidth %.0f GB/s (read-only stream %.0f GB/s); %s, G=%d, %s%s; times are CUDA-graph "
              "medians; read_us: a zero-compute kernel reading the same int4 words and scales\n",
              lowbit::bench::machine_description().c_str(), copy_gbps, read_gbps, dtype_name(act), group,
              sym ? "sym" : "asym", act_order ? ", act-order (k_perm: x gathered first, timed)" : "");
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench gemm: cublasCreate failed\n");
    return 1;
  }
  cudaStream_t stream;
  LOWBIT_BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasSetStream(handle, stream);

  // %peak: TFLOP/s over the H200's dense bf16/fp16 tensor peak (989 TFLOP/s, spec sheet).
  constexpr double kPeakTflops = 989.0;
  std::vector<lowbit::bench::Table::Column> columns = {
      {"shape", 20},  {"layout", 9}, {"path", 9},  {"runs", 9},  {"M", 6},       {"N", 6},       {"K", 6},
      {"time_us", 10}, {"TFLOP/s", 8}, {"%peak", 6}, {"TB/s", 6}, {"%floor", 7},  {"%rdbw", 6},   {"read_us", 8},
      {"%read", 6},   {"cublas_us", 10}, {"speedup", 8}, {"#wrong", 7}};
#ifdef LOWBIT_HAVE_VLLM_MARLIN
  // marlin_us: vLLM's Marlin on the same weights; x_marlin = marlin_us / time_us (> 1: lowbit faster).
  namespace vm = lowbit::bench::vllm_marlin;
  for (lowbit::bench::Table::Column c : {lowbit::bench::Table::Column{"marlin_us", 10}, {"x_marlin", 8}, {"#wrong_m", 8}})
    columns.push_back(c);
  std::printf("# marlin_us: %s; x_marlin = marlin_us / time_us\n", vm::kMarlinSource);
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
  // machete_us: vLLM's Machete on the same weights; x_machete = machete_us / time_us.
  namespace vmc = lowbit::bench::vllm_machete;
  for (lowbit::bench::Table::Column c :
       {lowbit::bench::Table::Column{"machete_us", 10}, {"x_machete", 9}, {"#wrong_mc", 9}})
    columns.push_back(c);
  std::printf("# machete_us: %s; x_machete = machete_us / time_us\n", vmc::kMacheteSource);
#endif
  lowbit::bench::Table table(columns);
  table.print_header();
  nlohmann::json rows = nlohmann::json::array();
  int total_wrong = 0;
  for (const DenseShape& sh : shapes) {
    cool_down();  // before the read reference too
    WeightShape ws{1, sh.n, sh.k, group, sym, act};
    // Scale ~ 1/sqrt(K) keeps outputs O(1) for both dtypes.
    const float scale = 0.5f / std::sqrt(static_cast<float>(sh.k));
    DevInt4 probe(ws, 1000u + sh.n, scale);
    const int copies = rotation_copies(probe.bytes, 16);
    std::vector<DevInt4*> w4;
    w4.push_back(&probe);
    std::vector<std::unique_ptr<DevInt4>> extra;
    for (int c = 1; c < copies; ++c) {
      extra.push_back(std::make_unique<DevInt4>(ws, 1000u + sh.n + 17u * c, scale));
      w4.push_back(extra.back().get());
    }
    for (size_t c = 0; c < w4.size(); ++c)
      if (!w4[c]->ok()) {  // a --shapes weight can ask for any size
        std::fprintf(stderr, "bench gemm: out of GPU memory for %s's int4 weight (copy %zu, %.2f GB)\n", sh.name.c_str(), c,
                     w4[c]->bytes / 1e9);
        return 1;
      }
    std::vector<int32_t> perm;
    DevBuf dperm;
    if (act_order) {
      perm = testing::random_k_perm(1, sh.k, 4242u + sh.k);
      dperm = upload(perm);
      for (DevInt4* d : w4) d->view.k_perm = dperm.as<int32_t>();
    }
    // The zero-compute reference: a kernel streaming the same int4 words and scales (same
    // rotation, programmatic launches like the decode kernel's); %read = read_us / time_us.
    lowbit::bench::Timing tread{};
    {
      std::vector<std::vector<lowbit::bench::ReadRegion>> regions;
      for (DevInt4* d : w4) {
        regions.push_back({{d->q.p, d->q.bytes}, {d->s.p, d->s.bytes}});
        if (!sym) regions.back().push_back({d->z.p, d->z.bytes});
      }
      st = lowbit::bench::time_stream_read(stream, regions, reps, &tread);
      if (!st.ok()) {
        std::fprintf(stderr, "bench gemm: read reference for %s: %s\n", sh.name.c_str(), st.to_string().c_str());
        return 1;
      }
    }
#ifdef LOWBIT_HAVE_VLLM_MARLIN
    // Marlin's copies, copy 0 converted from lowbit's copy 0 (checked against cuBLAS on its
    // dequantized weights, like lowbit's).
    std::vector<vm::Weights> mw;
    vm::Workspace mws;
    if (Status ms = act_order ? make_status(StatusCode::kNotSupported, "--act-order") : vm::supported(ws); !ms.ok()) {
      std::printf("# %s: no Marlin column: %s\n", sh.name.c_str(), ms.to_string().c_str());
    } else {
      st = vm::make_copies(probe.view, copies, stream, &mw);
      if (st.ok()) st = mws.ensure(stream);
      if (!st.ok()) {
        std::fprintf(stderr, "bench gemm: vLLM Marlin weights for %s: %s\n", sh.name.c_str(), st.to_string().c_str());
        return 1;
      }
    }
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
    // Machete's copies, likewise; its stream-K workspace is one buffer for every M (vLLM
    // allocates CUTLASS's get_workspace_size per call; a call needing more fails by name).
    std::vector<vmc::Weights> mcw;
    vmc::Workspace mcws;
    if (Status ms = act_order ? make_status(StatusCode::kNotSupported, "--act-order") : vmc::supported(ws); !ms.ok()) {
      std::printf("# %s: no Machete column: %s\n", sh.name.c_str(), ms.to_string().c_str());
    } else {
      st = vmc::make_copies(probe.view, copies, stream, &mcw);
      if (st.ok()) st = mcws.ensure(size_t{256} << 20);
      if (!st.ok()) {
        std::fprintf(stderr, "bench gemm: vLLM Machete weights for %s: %s\n", sh.name.c_str(), st.to_string().c_str());
        return 1;
      }
    }
#endif
    const size_t wbf_bytes = static_cast<size_t>(sh.n) * sh.k * 2;
    const int bcopies = rotation_copies(wbf_bytes, 8);
    for (const std::string& layout : layouts) {
      const KernelLayoutKind kind = layout == "npacked" ? KernelLayoutKind::kNPackedInterleaved : kernel_layout_for(ws);
      for (DevInt4* d : w4) d->view.kind = kind;
      // cuBLAS weights: the dequantized int4 weights (same values), rotated likewise.
      std::vector<DevBuf> wbf;
      LOWBIT_BENCH_CUDA(cudaDeviceSynchronize());  // fills ran on the default stream; `stream` does not wait for it
      for (int c = 0; c < bcopies; ++c) {
        wbf.emplace_back(wbf_bytes);
        st = dequantize(stored_order(w4[c % copies]->view), wbf.back().as<uint16_t>(), stream);
        if (!st.ok()) break;
      }
      if (!st.ok() || !wbf.back().p) {
        std::fprintf(stderr, "bench gemm: setup failed for %s: %s\n", sh.name.c_str(), st.to_string().c_str());
        return 1;
      }
      for (int m : ms) {
        DevBuf x(static_cast<size_t>(m) * sh.k * 2), y(static_cast<size_t>(m) * sh.n * 2),
            yref(static_cast<size_t>(m) * sh.n * 2);
        fill_act(x.p, static_cast<size_t>(m) * sh.k, 77u + m, act, 0.1f, 1.f);
        LOWBIT_BENCH_CUDA(cudaDeviceSynchronize());  // x fill (default stream) before `stream` uses it
        // --act-order: cuBLAS multiplies the stored-order weights by x[:, k_perm].
        DevBuf xperm;
        if (act_order)
          xperm = upload(testing::gather_columns(download<uint16_t>(x.as<uint16_t>(), static_cast<size_t>(m) * sh.k),
                                                 m, sh.k, perm.data()));
        const void* xref = act_order ? xperm.p : x.p;
        int bcall = 0;
        auto run_cublas = [&](cudaStream_t s) -> Status {
          if (cublas_gemm(handle, act, m, sh.n, sh.k, xref, wbf[bcall++ % bcopies].p, yref.p) != CUBLAS_STATUS_SUCCESS)
            return make_status(StatusCode::kInternal, "cublasGemmEx failed");
          return Status::Ok();
        };
        lowbit::bench::Timing tb{};
        bool have_tb = false;
#ifdef LOWBIT_HAVE_VLLM_MARLIN
        lowbit::bench::Timing tm{};  // vLLM Marlin
        bool have_tm = false;
        int marlin_wrong = -1;
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
        lowbit::bench::Timing tmc{};  // vLLM Machete
        bool have_tmc = false;
        int machete_wrong = -1;
#endif
        for (GemmPath path : paths) {
          if (path == GemmPath::kSkinny && m > 512) continue;
          if (path == GemmPath::kTiled && kind == KernelLayoutKind::kMmaTiled) continue;       // needs N-packed
          if (path == GemmPath::kPipelined && kind != KernelLayoutKind::kMmaTiled) continue;   // needs MMA-tiled
          size_t wsb = 0;
          (void)gemm_workspace_size(w4[0]->view, m, &wsb, path);  // the view: the act-order copy of x too
          DevBuf work(wsb);
          int call = 0;
          auto run_int4 = [&](cudaStream_t s) {
            GemmArgs a;
            a.x = x.p;
            a.y = y.p;
            a.m = m;
            a.path = path;
            return gemm(a, w4[call++ % copies]->view, work.p, wsb, s);
          };
          // Correctness on the first copy: int4 GEMM vs cuBLAS on its dequantized weights.
          call = 0;
          bcall = 0;
          st = run_int4(stream);
          if (st.ok()) st = run_cublas(stream);
          LOWBIT_BENCH_CUDA(cudaStreamSynchronize(stream));
          int wrong = -1;
          if (st.ok()) {
            wrong = count_wrong(act, m, sh.n, y.p, yref.p);
            total_wrong += wrong;
          }
          lowbit::bench::Timing t4{};
          if (m <= 512) cool_down();
          if (m >= 2048) heavy_before = true;
          if (st.ok()) st = lowbit::bench::time_in_graph(stream, run_int4, copies, 2, reps, &t4);
#ifdef LOWBIT_INT4_TRACE
          if (const char* tp = std::getenv("LOWBIT_INT4_TRACE_OUT"); tp != nullptr && st.ok()) {
            detail::dense_trace_dump((std::string(tp) + "_" + sh.name + "_m" + std::to_string(m) + ".csv").c_str());
            detail::pipe_trace_dump((std::string(tp) + "_ws_" + sh.name + "_m" + std::to_string(m) + ".csv").c_str());
          }
#endif
          if (st.ok() && !have_tb) {
            st = lowbit::bench::time_in_graph(stream, run_cublas, bcopies, 2, reps, &tb);
            have_tb = st.ok();
          }
#ifdef LOWBIT_HAVE_VLLM_MARLIN
          if (st.ok() && !mw.empty() && !have_tm) {
            DevBuf ym(static_cast<size_t>(m) * sh.n * 2);
            int mcall = 0;
            auto run_marlin = [&](cudaStream_t s) { return vm::gemm(mw[mcall++ % mw.size()], x.p, ym.p, m, mws, s); };
            bcall = 0;
            st = run_marlin(stream);
            if (st.ok()) st = run_cublas(stream);
            LOWBIT_BENCH_CUDA(cudaStreamSynchronize(stream));
            if (st.ok()) {
              marlin_wrong = count_wrong(act, m, sh.n, ym.p, yref.p);
              total_wrong += marlin_wrong;
              st = lowbit::bench::time_in_graph(stream, run_marlin, static_cast<int>(mw.size()), 2, reps, &tm);
              have_tm = st.ok();
            }
          }
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
          // A Machete call that fails (a shape or workspace its dispatch refuses) costs its cells,
          // not the run: the row says "-" and a "#" line says why.
          if (st.ok() && !mcw.empty() && !have_tmc) {
            DevBuf ymc(static_cast<size_t>(m) * sh.n * 2);
            int mccall = 0;
            auto run_machete = [&](cudaStream_t s) {
              return vmc::gemm(mcw[mccall++ % mcw.size()], x.p, ymc.p, m, mcws, s);
            };
            bcall = 0;
            Status mst = run_machete(stream);
            if (mst.ok()) mst = run_cublas(stream);
            LOWBIT_BENCH_CUDA(cudaStreamSynchronize(stream));
            if (mst.ok()) {
              machete_wrong = count_wrong(act, m, sh.n, ymc.p, yref.p);
              total_wrong += machete_wrong;
              mst = lowbit::bench::time_in_graph(stream, run_machete, static_cast<int>(mcw.size()), 2, reps, &tmc);
              have_tmc = mst.ok();
            }
            if (!mst.ok()) {
              std::printf("# %s M=%d: no Machete cell: %s\n", sh.name.c_str(), m, mst.to_string().c_str());
              (void)cudaGetLastError();  // clears a failed capture's error; a sticky fault ends the run at the next sync
            }
          }
#endif
          if (!st.ok()) {
            std::fprintf(stderr, "bench gemm: %s M=%d path %s: %s\n", sh.name.c_str(), m, gemm_path_name(path),
                         st.to_string().c_str());
            return 1;
          }
          const double flops = 2.0 * m * sh.n * sh.k;
          const double bytes = static_cast<double>(probe.bytes) + 2.0 * m * sh.k + 2.0 * m * sh.n;
          const double floor_us = bytes / (copy_gbps * 1e3);
          const double tflops = flops / (t4.median_us * 1e6), tbs = bytes / (t4.median_us * 1e6);
          const double pct = 100.0 * floor_us / t4.median_us, speedup = tb.median_us / t4.median_us;
          const double peak = 100.0 * tflops / kPeakTflops;
          const double rdbw = 100.0 * tbs * 1e3 / read_gbps;  // share of the read-only stream's bandwidth
          const char* runs = gemm_path_name(gemm_resolved_path(ws, kind, m, path));
          std::vector<std::string> cells = {sh.name, kernel_layout_name(kind), gemm_path_name(path), runs,
                                            std::to_string(m), std::to_string(sh.n), std::to_string(sh.k),
                                            fmt(t4.median_us, 1), fmt(tflops, 1), fmt(peak, 1), fmt(tbs, 2),
                                            fmt(pct, 1), fmt(rdbw, 1), fmt(tread.median_us, 1),
                                            fmt(100.0 * tread.median_us / t4.median_us, 1), fmt(tb.median_us, 1),
                                            fmt(speedup, 2), std::to_string(wrong)};
#ifdef LOWBIT_HAVE_VLLM_MARLIN
          cells.push_back(have_tm ? fmt(tm.median_us, 1) : "-");
          cells.push_back(have_tm ? fmt(tm.median_us / t4.median_us, 2) : "-");
          cells.push_back(have_tm ? std::to_string(marlin_wrong) : "-");
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
          cells.push_back(have_tmc ? fmt(tmc.median_us, 1) : "-");
          cells.push_back(have_tmc ? fmt(tmc.median_us / t4.median_us, 2) : "-");
          cells.push_back(have_tmc ? std::to_string(machete_wrong) : "-");
#endif
          table.print_row(cells);
          rows.push_back({{"shape", sh.name},
                          {"layout", kernel_layout_name(kind)},
                          {"path", gemm_path_name(path)},
                          {"runs_as", runs},
                          {"M", m},
                          {"N", sh.n},
                          {"K", sh.k},
                          {"time_us", t4.median_us},
                          {"min_us", t4.min_us},
                          {"tflops", tflops},
                          {"pct_peak", peak},
                          {"tbps", tbs},
                          {"pct_floor", pct},
                          {"floor_us", floor_us},
                          {"pct_read_bw", rdbw},
                          {"read_us", tread.median_us},
                          {"pct_read", 100.0 * tread.median_us / t4.median_us},
                          {"cublas_us", tb.median_us},
                          {"cublas_tflops", flops / (tb.median_us * 1e6)},
                          {"speedup", speedup},
                          {"wrong", wrong},
                          {"dtype", dtype_name(act)},
                          {"act_order", act_order},
                          {"group", group},
                          {"sym", sym}});
#ifdef LOWBIT_HAVE_VLLM_MARLIN
          if (have_tm) {
            rows.back()["marlin_us"] = tm.median_us;
            rows.back()["marlin_min_us"] = tm.min_us;
            rows.back()["x_marlin"] = tm.median_us / t4.median_us;
            rows.back()["marlin_wrong"] = marlin_wrong;
            rows.back()["marlin_pct_floor"] = 100.0 * floor_us / tm.median_us;
          }
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
          if (have_tmc) {
            rows.back()["machete_us"] = tmc.median_us;
            rows.back()["machete_min_us"] = tmc.min_us;
            rows.back()["x_machete"] = tmc.median_us / t4.median_us;
            rows.back()["machete_wrong"] = machete_wrong;
            rows.back()["machete_pct_floor"] = 100.0 * floor_us / tmc.median_us;
          }
#endif
        }
      }
    }  // layouts
  }
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  nlohmann::json rec = lowbit::bench::run_record(argv, "bench gemm");
  rec["copy_gbps"] = copy_gbps;
  rec["read_gbps"] = read_gbps;
#ifdef LOWBIT_HAVE_VLLM_MARLIN
  rec["marlin"] = std::string(vm::kMarlinSource) +
                  ": marlin_us on the same int4 values (uint4b8, permuted scales), fp32 reduce, no atomics; "
                  "x_marlin = marlin_us / time_us";
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
  rec["machete"] = std::string(vmc::kMacheteSource) +
                   ": machete_us on the same int4 values (uint4b8, prepacked by machete_prepack_B), vLLM's default "
                   "schedule heuristic; x_machete = machete_us / time_us";
#endif
  rec["rdbw"] = "%rdbw (pct_read_bw): TB/s over the read-only stream bandwidth read_gbps";
  rec["floor"] = "bytes(int4 weights + scales (+zeros) + x + y) / copy bandwidth";
  rec["read"] =
      "read_us: a zero-compute kernel reading the same int4 weights and scales (programmatic launches, same rotation); "
      "%read = read_us / time_us";
  // One panel per path (or per layout) when several were asked for (one line per shape
  // otherwise zig-zags between their rows).
  nlohmann::json plot = {{"x", "M"},     {"y", "speedup"}, {"series", "shape"}, {"logx", true},
                         {"logy", true}, {"title", "int4 GEMM speedup over cuBLAS bf16"}};
#ifdef LOWBIT_HAVE_VLLM_MARLIN
  // The Marlin build plots the side-by-side: vLLM Marlin's time over lowbit's.
  plot["y"] = "x_marlin";
  plot["logy"] = false;
  plot["title"] = "vLLM Marlin time / lowbit int4 time (> 1: lowbit faster)";
#endif
#ifdef LOWBIT_HAVE_VLLM_MACHETE
  // Machete is what vLLM runs on Hopper where it applies: the Machete build plots it.
  plot["y"] = "x_machete";
  plot["logy"] = false;
  plot["title"] = "vLLM Machete time / lowbit int4 time (> 1: lowbit faster)";
#endif
  if (paths.size() > 1)
    plot["facet"] = "path";
  else if (layouts.size() > 1)
    plot["facet"] = "layout";
  lowbit::bench::write_results(out, rec, rows, table.markdown(), plot);
  std::printf("# total #wrong: %d\n", total_wrong);
  return total_wrong == 0 ? 0 : 3;
}

}  // namespace
}  // namespace lowbit::int4

LOWBIT_REGISTER_COMMAND("bench gemm",
                        "INT4 W4A16 dense GEMM vs cuBLAS and the memory floor (--m 1,8,..., --quick, --out PREFIX)",
                        lowbit::int4::run_bench_gemm);
