// GPU model ops vs CPU fp64 references (tests/gpu/model/model_reference.h). Inputs are
// non-zero random bf16 values; outputs are poisoned (0xFF bytes = NaN) before each run.
// Tolerances: ops that round an fp32 result once to bf16 get 2^-7 relative (one bf16 ulp
// at the value, which covers the half-ulp rounding plus fp32 evaluation error); the
// residual add and the embedding are bit-exact; attention/GEMM tolerances are stated
// at each test.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "lowbit/model/gpu_ops.h"
#include "tests/gpu/model/model_reference.h"

namespace lowbit::model {
namespace {
namespace ref = testref;
using gpu::bf16;

#define ASSERT_CUDA(x) ASSERT_EQ((x), cudaSuccess) << #x
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t n_) : n(n_) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T) + 16), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xFF, n * sizeof(T) + 16), cudaSuccess);  // poison
  }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& v) { EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};
Dev<uint16_t>* make_bf16(const std::vector<float>& v) {
  auto* d = new Dev<uint16_t>(v.size());
  d->put(ref::to_bf16_bits(v));
  return d;
}
bf16* B(Dev<uint16_t>& d) { return reinterpret_cast<bf16*>(d.p); }

void expect_close_rel(const std::vector<float>& got, const std::vector<double>& want, double rel, double abs_tol,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = rel * std::fabs(want[i]) + abs_tol;
    if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i] << " tol " << tol;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " out of tolerance";
}

TEST(ModelOps, EmbeddingExactAndBadIdIsNaN) {
  const int vocab = 50, H = 72, T = 9;
  auto table = ref::random_bf16(size_t(vocab) * H, 1.0f, 1);
  std::vector<int32_t> ids = {3, 0, 49, 7, 7, 12, 50, -1, 25};
  std::unique_ptr<Dev<uint16_t>> dt(make_bf16(table));
  Dev<int32_t> di(T);
  di.put(ids);
  Dev<uint16_t> out(size_t(T) * H);
  ASSERT_OK(gpu::embedding(di.p, T, B(*dt), vocab, H, B(out), 0));
  auto o = out.get();
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) {
      const uint16_t g = o[size_t(t) * H + i];
      if (ids[t] < 0 || ids[t] >= vocab)
        EXPECT_TRUE(std::isnan(bf16_bits_to_float(g))) << "t=" << t;
      else
        ASSERT_EQ(g, float_to_bf16_bits(table[size_t(ids[t]) * H + i])) << "t=" << t << " i=" << i;
    }
  EXPECT_FALSE(gpu::embedding(nullptr, T, B(*dt), vocab, H, B(out), 0).ok());
}

TEST(ModelOps, RmsNormStridedRows) {
  const int rows = 6, H = 300, stride = 333;
  auto x = ref::random_bf16(size_t(rows) * stride, 3.0f, 2);
  auto w = ref::random_bf16(H, 1.5f, 3);
  std::vector<float> xc(size_t(rows) * H);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < H; ++i) xc[size_t(r) * H + i] = x[size_t(r) * stride + i];
  std::vector<double> want;
  ref::rmsnorm(xc, w, rows, H, 1e-5, &want);
  std::unique_ptr<Dev<uint16_t>> dx(make_bf16(x)), dw(make_bf16(w));
  Dev<uint16_t> out(size_t(rows) * H);
  ASSERT_OK(gpu::rmsnorm(B(*dx), stride, B(*dw), B(out), H, rows, H, 1e-5f, 0));
  expect_close_rel(ref::from_bf16_bits(out.get()), want, 1.0 / 128, 1e-6, "rmsnorm");
}

TEST(ModelOps, RopeAdjacentPairs) {
  const int T = 7, nh = 5, hd = 16, stride = nh * hd + 24;  // extra columns stay untouched
  auto x = ref::random_bf16(size_t(T) * stride, 2.0f, 4);
  std::vector<int> pos = {0, 1, 2, 17, 100, 511, 1023};
  std::vector<double> want(x.begin(), x.end());
  ref::rope(&want, stride, T, nh, hd, pos, 10000.0);
  std::unique_ptr<Dev<uint16_t>> dx(make_bf16(x));
  Dev<int32_t> dp(T);
  dp.put(std::vector<int32_t>(pos.begin(), pos.end()));
  ASSERT_OK(gpu::rope(B(*dx), stride, T, nh, hd, dp.p, 10000.0f, 0));
  auto got = ref::from_bf16_bits(dx->get());
  // Angles up to ~1000 rad in fp32 carry ~1.2e-4 rad error (x |v| <= 2.9); output rounds once to bf16.
  expect_close_rel(got, want, 1.0 / 128, 1e-3, "rope");
  for (int t = 0; t < T; ++t)
    for (int i = nh * hd; i < stride; ++i) ASSERT_EQ(got[size_t(t) * stride + i], x[size_t(t) * stride + i]);
  EXPECT_FALSE(gpu::rope(B(*dx), stride, T, nh, 15, dp.p, 10000.0f, 0).ok());
}

gpu::AttentionShape small_shape() {
  gpu::AttentionShape s;
  s.batch = 3, s.seq = 37, s.n_q_heads = 6, s.n_kv_heads = 2, s.head_dim = 32;
  s.qkv_stride = (s.n_q_heads + 2 * s.n_kv_heads) * s.head_dim + 8;
  s.out_stride = s.n_q_heads * s.head_dim + 16;
  return s;
}

void run_attention(int ws_sequences, gpu::AttentionShape s = small_shape()) {
  const int T = s.batch * s.seq, W = (s.n_q_heads + 2 * s.n_kv_heads) * s.head_dim;
  auto qkv = ref::random_bf16(size_t(T) * s.qkv_stride, 1.5f, 5);
  std::vector<float> packed(size_t(T) * W);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < W; ++i) packed[size_t(t) * W + i] = qkv[size_t(t) * s.qkv_stride + i];
  std::vector<double> want;
  ref::attention(packed, s.batch, s.seq, s.n_q_heads, s.n_kv_heads, s.head_dim, &want);
  std::unique_ptr<Dev<uint16_t>> dq(make_bf16(qkv));
  Dev<uint16_t> out(size_t(T) * s.out_stride);
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  gpu::AttentionShape one = s;
  one.batch = ws_sequences;
  const size_t ws = gpu::attention_workspace_bytes(one);
  Dev<char> dws(ws);
  ASSERT_OK(gpu::causal_attention(h, s, B(*dq), B(out), dws.p, ws, 0));
  ASSERT_CUDA(cudaDeviceSynchronize());
  auto o = ref::from_bf16_bits(out.get());
  std::vector<float> got(size_t(T) * s.n_q_heads * s.head_dim);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < s.n_q_heads * s.head_dim; ++i) got[size_t(t) * s.n_q_heads * s.head_dim + i] = o[size_t(t) * s.out_stride + i];
  // Probabilities are rounded to bf16 (2^-9 relative each) before P*V, the output once more:
  // |err| <= 2^-8 |out| + 2^-8 max|v| covers both with margin.
  expect_close_rel(got, want, 1.0 / 256, 1.5 / 256, "attention");
  EXPECT_FALSE(gpu::causal_attention(h, s, B(*dq), B(out), dws.p, 1024, 0).ok());
  cublasDestroy(h);
}
TEST(ModelOps, CausalGqaAttention) { run_attention(3); }
TEST(ModelOps, CausalGqaAttentionChunkedWorkspace) { run_attention(1); }
// SmolLM2-135M's attention on one GPU (9 query / 3 KV heads, head_dim 64, QKV row stride
// 960) at the lengths `lowbit generate --device gpu` uses: one sequence of prompt + new
// tokens. Odd lengths and lengths that are no multiple of 8 used to hand cuBLAS score and
// probability matrices off the 16-byte alignment it assumes (model_attention_layout.h).
TEST(ModelOps, CausalGqaAttentionSmolLm2ShapesBeyond64) {
  for (int seq : {64, 65, 72, 99, 100, 101, 127, 150, 200}) {
    SCOPED_TRACE(seq);
    gpu::AttentionShape s;
    s.batch = 1, s.seq = seq, s.n_q_heads = 9, s.n_kv_heads = 3, s.head_dim = 64;
    s.qkv_stride = (s.n_q_heads + 2 * s.n_kv_heads) * s.head_dim;
    s.out_stride = s.n_q_heads * s.head_dim;
    run_attention(1, s);
  }
}
// Two sequences of an odd length: the second sequence's matrices start mid-workspace.
TEST(ModelOps, CausalGqaAttentionTwoSequencesOddLength) {
  gpu::AttentionShape s;
  s.batch = 2, s.seq = 101, s.n_q_heads = 9, s.n_kv_heads = 3, s.head_dim = 64;
  s.qkv_stride = (s.n_q_heads + 2 * s.n_kv_heads) * s.head_dim;
  s.out_stride = s.n_q_heads * s.head_dim;
  run_attention(2, s);
}

TEST(ModelOps, SiluMul) {
  const int T = 11, I = 130;
  auto gu = ref::random_bf16(size_t(T) * 2 * I, 6.0f, 6);
  std::vector<double> want(size_t(T) * I);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < I; ++i) want[size_t(t) * I + i] = ref::silu(gu[size_t(t) * 2 * I + i]) * gu[size_t(t) * 2 * I + I + i];
  std::unique_ptr<Dev<uint16_t>> dg(make_bf16(gu));
  Dev<uint16_t> out(size_t(T) * I);
  ASSERT_OK(gpu::silu_mul(B(*dg), T, I, B(out), 0));
  expect_close_rel(ref::from_bf16_bits(out.get()), want, 1.0 / 128, 1e-6, "silu_mul");
}

TEST(ModelOps, ResidualAddBitExactAlignedAndNot) {
  for (int offset : {0, 1}) {
    const int n = 1003;
    auto x = ref::random_bf16(n + 1, 4.0f, 7), y = ref::random_bf16(n + 1, 4.0f, 8);
    std::unique_ptr<Dev<uint16_t>> dx(make_bf16(x)), dy(make_bf16(y));
    ASSERT_OK(gpu::residual_add(B(*dx) + offset, B(*dy) + offset, n, 0));
    auto got = dx->get();
    for (int i = offset; i < n + offset; ++i)
      ASSERT_EQ(got[i], float_to_bf16_bits(x[i] + y[i])) << "i=" << i << " offset=" << offset;
  }
}

TEST(ModelOps, LinearBf16AndFp32Out) {
  const int T = 37, N = 48, K = 80;
  auto x = ref::random_bf16(size_t(T) * K, 1.0f, 9), w = ref::random_bf16(size_t(N) * K, 1.0f, 10);
  std::vector<double> want;
  ref::linear(x, w, T, N, K, &want);
  std::unique_ptr<Dev<uint16_t>> dx(make_bf16(x)), dw(make_bf16(w));
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  Dev<float> y32(size_t(T) * N);
  ASSERT_OK(gpu::linear(h, B(*dx), K, B(*dw), y32.p, true, N, T, N, K));
  // fp32 accumulation of K = 80 exact products (bf16 x bf16): worst case ~ K * 2^-24 * sum|xw| ~ 1e-4.
  expect_close_rel(y32.get(), want, 1e-5, 5e-4, "linear fp32");
  Dev<uint16_t> y16(size_t(T) * N);
  ASSERT_OK(gpu::linear(h, B(*dx), K, B(*dw), B(y16), false, N, T, N, K));
  expect_close_rel(ref::from_bf16_bits(y16.get()), want, 1.0 / 128, 1e-4, "linear bf16");
  cublasDestroy(h);
}

TEST(ModelOps, NllRows) {
  const int rows = 5, vocab = 1000;
  auto l = ref::random_bf16(size_t(rows) * vocab, 8.0f, 11);
  std::vector<int32_t> tgt = {0, 999, 500, -1, 3};
  Dev<float> dl(l.size());
  dl.put(l);
  Dev<int32_t> dt(rows);
  dt.put(tgt);
  Dev<float> out(rows);
  ASSERT_OK(gpu::nll_rows(dl.p, rows, vocab, dt.p, out.p, 0));
  auto got = out.get();
  for (int r = 0; r < rows; ++r) {
    if (tgt[r] < 0) {
      EXPECT_EQ(got[r], 0.0f);
      continue;
    }
    double m = -1e300, s = 0;
    for (int j = 0; j < vocab; ++j) m = std::max(m, double(l[size_t(r) * vocab + j]));
    for (int j = 0; j < vocab; ++j) s += std::exp(double(l[size_t(r) * vocab + j]) - m);
    const double want = m + std::log(s) - l[size_t(r) * vocab + tgt[r]];
    EXPECT_NEAR(got[r], want, 1e-4 * std::fabs(want) + 1e-5) << "row " << r;
  }
}

TEST(ModelOps, FillUniformDeterministicInRange) {
  const size_t n = 100003;
  Dev<uint16_t> a(n), b(n);
  ASSERT_OK(gpu::fill_uniform(B(a), n, 42, -0.5f, 0.25f, 0));
  ASSERT_OK(gpu::fill_uniform(B(b), n, 42, -0.5f, 0.25f, 0));
  auto va = a.get(), vb = b.get();
  EXPECT_EQ(va, vb);
  double mean = 0;
  for (auto h : va) {
    const float f = bf16_bits_to_float(h);
    ASSERT_TRUE(f >= -0.5f && f <= 0.25f) << f;
    mean += f;
  }
  EXPECT_NEAR(mean / n, -0.125, 0.01);
}

}  // namespace
}  // namespace lowbit::model
