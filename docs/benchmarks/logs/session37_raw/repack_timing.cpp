// Times the host-side INT4 repacks on one Qwen3-30B-A3B w13 (128 experts, 1536 x 2048, G = 128):
// repack_for_kernels, repack_to_npacked and 128x gptq_to_kpacked. Built against a lowbit build's
// static libraries (convert_cpu_bench.py builds it twice: this commit and the baseline).
#include <chrono>
#include <cstdio>
#include <random>
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/int4/weights.h"
#include "lowbit/int4/formats.h"
using namespace lowbit; using namespace lowbit::int4;
int main() {
  WeightShape s{128, 1536, 2048, 128, true, DType::kBF16};
  KPackedWeights w; kpacked_allocate(s, &w);
  std::mt19937 rng(1); for (auto& b : w.qweight) b = rng(); for (auto& v : w.scales) v = 0x3c00;
  auto t0 = std::chrono::steady_clock::now();
  KernelWeights kw; Status st = repack_for_kernels(w, &kw);
  auto t1 = std::chrono::steady_clock::now();
  NPackedWeights np; st = repack_to_npacked(w, &np);
  auto t2 = std::chrono::steady_clock::now();
  GptqLinear g; WeightShape s1{1, 1536, 2048, 128, true, DType::kF16}; KPackedWeights w1; kpacked_allocate(s1, &w1);
  for (auto& b : w1.qweight) b = rng(); for (auto& v : w1.scales) v = 0x3c00;
  st = kpacked_to_gptq(w1, 0, GptqVersion::kV1, &g);
  auto t3 = std::chrono::steady_clock::now();
  KPackedWeights back; for (int i = 0; i < 128; ++i) st = gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &back);
  auto t4 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("%s: w13 of 128 experts (%.0f MB int4): repack_for_kernels %.0f ms, repack_to_npacked %.0f ms, 128x gptq_to_kpacked %.0f ms\n",
              st.ok() ? "ok" : "ERR", w.qweight.size() / 1e6, ms(t0, t1), ms(t1, t2), ms(t3, t4));
}
