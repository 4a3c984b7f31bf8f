// `lowbit bench codec`: encode, decode and decode-accumulate throughput of the CUDA codec for
// every spec and dtype on one large tensor of random non-zero values, timed in CUDA graphs,
// against the device copy bandwidth measured in the same run, with a bit-exactness check
// of a prefix against the CPU reference.
//
// GB/s counts bytes read + written (1e9 bytes/s), the same convention as the copy baseline:
//   encode:            2n (read) + encoded_bytes (write)
//   decode:            encoded_bytes (read) + 2n (write)
//   decode_accumulate: encoded_bytes + 4n (read) + 4n (write)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "bench/common/gpu_timing.cuh"
#include "lowbit/codec.h"
#include "lowbit/codec_cuda.h"
#include "lowbit/detail/cuda_check.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"

namespace lowbit::codec {
namespace {

// Deterministic pseudo-Gaussian non-zero data (sum of 4 uniforms from a hash), generated
// on the device so 256 Mi elements take no host time.
__global__ void fill_kernel(uint16_t* x, size_t n, DType t, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32) * 40503u;
    float s = 0;
    for (int k = 0; k < 4; ++k) {
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      s += (h & 0xFFFFFF) * (1.0f / 16777216.0f);
    }
    float v = (s - 2.0f) * 1.7f + 1e-3f;
    x[i] = float_to_half_bits(t, v == 0.0f ? 1e-3f : v);
  }
}

Status run(const std::vector<std::string>& argv, int* rc) {
  cli::Args args(argv, {"elems", "out", "help", "reps"}, {"help"});
  if (!args.ok() || args.has("help")) {
    std::printf(
        "usage: lowbit bench codec [--elems N] [--out PREFIX] [--reps R]\n"
        "  Times encode / decode / decode-accumulate (CUDA graphs) for int4/int8 x G=32/64/128 x\n"
        "  bf16/fp16 on N elements (default 256Mi); reports GB/s (bytes read + written) and %% of\n"
        "  the device copy bandwidth measured in the same run; checks a prefix against the CPU\n"
        "  reference. Writes PREFIX.json/.md/.png (default docs/benchmarks/codec).\n");
    if (!args.ok()) std::fprintf(stderr, "error: %s\n", args.error().c_str());
    *rc = args.ok() ? 0 : 2;
    return Status::Ok();
  }
  uint64_t n64 = 0;
  if (!cli::parse_size(args.get("elems", "268435456"), &n64) || n64 == 0) {
    *rc = 2;
    return make_status(StatusCode::kInvalidArgument, "--elems: expected a positive count");
  }
  const size_t n = n64;
  const int reps = static_cast<int>(args.get_int("reps", 10));
  const std::string prefix = args.get("out", "docs/benchmarks/codec");

  double copy_gbps = 0;
  LOWBIT_RETURN_IF_ERROR(bench::measure_copy_bandwidth(0, 2 * n, &copy_gbps));
  std::printf("# %s\n# copy bandwidth (read+write): %.0f GB/s, n = %zu elements\n",
              bench::machine_description().c_str(), copy_gbps, n);

  uint16_t *x = nullptr, *y = nullptr;
  uint8_t* enc = nullptr;
  float* acc = nullptr;
  const size_t max_enc = codec_encoded_bytes({8, 32}, n);
  LOWBIT_CUDA_RETURN(cudaMalloc(&x, n * 2));
  LOWBIT_CUDA_RETURN(cudaMalloc(&y, n * 2));
  LOWBIT_CUDA_RETURN(cudaMalloc(&enc, max_enc));
  LOWBIT_CUDA_RETURN(cudaMalloc(&acc, n * 4));
  cudaStream_t stream;
  LOWBIT_CUDA_RETURN(cudaStreamCreate(&stream));

  const size_t check_n = std::min<size_t>(n, size_t{1} << 20);  // multiple of every G
  bench::Table table({{"dtype", 6}, {"spec", 10}, {"op", 18}, {"time_us", 10}, {"GB/s", 9}, {"%copy", 7}, {"#wrong", 7}});
  table.print_header();
  nlohmann::json rows = nlohmann::json::array();
  int total_wrong = 0;
  for (DType t : {DType::kBF16, DType::kF16}) {
    fill_kernel<<<1024, 256, 0, stream>>>(x, n, t, 0x1234u);
    LOWBIT_CUDA_RETURN_LAUNCH();
    std::vector<uint16_t> hx(check_n);
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(hx.data(), x, check_n * 2, cudaMemcpyDeviceToHost, stream));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(stream));
    std::vector<float> acc0(check_n);
    for (size_t i = 0; i < check_n; ++i) acc0[i] = static_cast<float>(i % 97) * 0.25f - 12.0f;
    for (int bits : {4, 8})
      for (int g : {32, 64, 128}) {
        CodecSpec s{bits, g};
        const size_t eb = codec_encoded_bytes(s, n);
        char spec_name[32];
        std::snprintf(spec_name, sizeof spec_name, "int%d/g%d", bits, g);
        // Correctness of a prefix: encode the full tensor once, compare the prefix's groups.
        std::vector<uint8_t> ref(codec_encoded_bytes(s, check_n));
        LOWBIT_RETURN_IF_ERROR(encode_ref(s, t, hx.data(), check_n, ref.data()));
        LOWBIT_CUDA_RETURN(cudaMemsetAsync(enc, 0xFF, eb, stream));
        LOWBIT_RETURN_IF_ERROR(encode_cuda(s, t, x, n, enc, stream));
        std::vector<uint8_t> got(ref.size());
        const size_t db = codec_data_bytes(s, check_n), mb = codec_meta_bytes(s, check_n);
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(got.data(), enc, db, cudaMemcpyDeviceToHost, stream));
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(got.data() + db, enc + codec_data_bytes(s, n), mb, cudaMemcpyDeviceToHost, stream));
        LOWBIT_CUDA_RETURN(cudaStreamSynchronize(stream));
        int wrong_enc = 0;
        for (size_t i = 0; i < ref.size(); ++i) wrong_enc += got[i] != ref[i];
        // Decode and accumulate of the prefix (its own encoding, so layout offsets match).
        uint8_t* enc_prefix = nullptr;
        LOWBIT_CUDA_RETURN(cudaMalloc(&enc_prefix, ref.size()));
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(enc_prefix, ref.data(), ref.size(), cudaMemcpyHostToDevice, stream));
        std::vector<uint16_t> dref(check_n), dgot(check_n);
        LOWBIT_RETURN_IF_ERROR(decode_ref(s, t, ref.data(), check_n, dref.data()));
        LOWBIT_CUDA_RETURN(cudaMemsetAsync(y, 0xFF, check_n * 2, stream));
        LOWBIT_RETURN_IF_ERROR(decode_cuda(s, t, enc_prefix, check_n, y, stream));
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(dgot.data(), y, check_n * 2, cudaMemcpyDeviceToHost, stream));
        std::vector<float> aref = acc0, agot(check_n);
        LOWBIT_RETURN_IF_ERROR(decode_accumulate_ref(s, t, ref.data(), check_n, aref.data()));
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(acc, acc0.data(), check_n * 4, cudaMemcpyHostToDevice, stream));
        LOWBIT_RETURN_IF_ERROR(decode_accumulate_cuda(s, t, enc_prefix, check_n, acc, stream));
        LOWBIT_CUDA_RETURN(cudaMemcpyAsync(agot.data(), acc, check_n * 4, cudaMemcpyDeviceToHost, stream));
        LOWBIT_CUDA_RETURN(cudaStreamSynchronize(stream));
        cudaFree(enc_prefix);
        int wrong_dec = 0, wrong_acc = 0;
        for (size_t i = 0; i < check_n; ++i) {
          wrong_dec += dgot[i] != dref[i];
          wrong_acc += std::memcmp(&agot[i], &aref[i], 4) != 0;
        }
        // acc must hold non-zero data while timing: fill it once (its values drift, irrelevant).
        LOWBIT_CUDA_RETURN(cudaMemsetAsync(acc, 0x3F, n * 4, stream));
        struct Op {
          const char* name;
          double bytes;
          int wrong;
          std::function<Status(cudaStream_t)> fn;
        } ops[] = {
            {"encode", 2.0 * n + eb, wrong_enc, [&](cudaStream_t st) { return encode_cuda(s, t, x, n, enc, st); }},
            {"decode", eb + 2.0 * n, wrong_dec, [&](cudaStream_t st) { return decode_cuda(s, t, enc, n, y, st); }},
            {"decode_accumulate", eb + 8.0 * n, wrong_acc,
             [&](cudaStream_t st) { return decode_accumulate_cuda(s, t, enc, n, acc, st); }},
        };
        for (auto& op : ops) {
          bench::Timing tm;
          LOWBIT_RETURN_IF_ERROR(bench::time_in_graph(stream, op.fn, 5, 2, reps, &tm));
          double gbps = op.bytes / (tm.median_us * 1e-6) / 1e9;
          double pct = 100.0 * gbps / copy_gbps;
          total_wrong += op.wrong;
          table.print_row({dtype_name(t), spec_name, op.name, bench::fmt(tm.median_us, 1), bench::fmt(gbps, 0),
                           bench::fmt(pct, 1), std::to_string(op.wrong)});
          rows.push_back({{"dtype", dtype_name(t)}, {"spec", spec_name}, {"bits", bits}, {"group_size", g},
                          {"op", op.name}, {"elems", n}, {"bytes_moved", op.bytes}, {"median_us", tm.median_us},
                          {"min_us", tm.min_us}, {"gbps", gbps}, {"pct_of_copy", pct}, {"copy_gbps", copy_gbps},
                          {"wrong", op.wrong}, {"checked_elems", check_n}});
        }
      }
  }
  cudaStreamDestroy(stream);
  cudaFree(x);
  cudaFree(y);
  cudaFree(enc);
  cudaFree(acc);
  nlohmann::json rec = bench::run_record(argv, "bench codec");
  rec["copy_gbps"] = copy_gbps;
  rec["bytes_formula"] =
      "encode 2n+enc, decode enc+2n, decode_accumulate enc+8n (bytes read + written; enc = encoded bytes)";
  bench::write_results(prefix, rec, rows, table.markdown(),
                       {{"x", "spec"}, {"y", "pct_of_copy"}, {"series", "op"}, {"facet", "dtype"},
                        {"title", "codec throughput, % of device copy bandwidth"}});
  std::printf("# %s: %d wrong values in the checked prefixes\n", total_wrong ? "FAIL" : "OK", total_wrong);
  *rc = total_wrong ? 1 : 0;
  return Status::Ok();
}

int bench_codec_main(const std::vector<std::string>& argv) {
  int rc = 0;
  Status st = run(argv, &rc);
  if (!st.ok()) {
    std::fprintf(stderr, "lowbit bench codec: %s\n", st.to_string().c_str());
    return 1;
  }
  return rc;
}

}  // namespace
}  // namespace lowbit::codec

LOWBIT_REGISTER_COMMAND("bench codec", "codec encode/decode throughput vs copy bandwidth (GPU)",
                        lowbit::codec::bench_codec_main);
