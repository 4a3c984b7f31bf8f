// The Flash All-Reduce communicator: buffers (one allocation per rank, mapped on every
// peer), NCCL for kNccl and as the fallback, validation, mode resolution and launches.
// Protocol: lowbit/detail/allreduce_protocol.h; kernels: kernels/allreduce/.
//
// After a timeout (check_peer_error() != Ok) the ranks' epochs disagree: the communicator
// refuses further calls with the same error and must be destroyed and recreated on every
// rank. One communicator serves one stream at a time (calls are stream-ordered; two
// concurrent calls on different streams of the same communicator are not supported).
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/allreduce/allreduce_kernels.h"
#include "lowbit/allreduce_cuda.h"
#include "lowbit/detail/cuda_check.h"
#include "runtime/allreduce/auto_table.h"

namespace lowbit::allreduce {
namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::kF16 ? ncclFloat16 : ncclBfloat16; }

// Default blocks (tiles) per mode and size; Options::num_sms / Config::default_num_sms
// override it. From `lowbit bench allreduce --tune` on 2x H200 (bf16, 2026-11-30): small
// messages want a few blocks (each block's flag round trip is the cost, but more blocks
// move the bytes in parallel), large ones every SM. Quantized: the per-block encode chain is
// the latency, so even 16 KiB uses 16 blocks.
int default_blocks(Mode m, size_t bytes, int sms) {
  constexpr size_t KiB = 1024;
  int b;
  switch (m) {
    case Mode::kOneShot:
      b = bytes <= 64 * KiB ? 8 : bytes <= 128 * KiB ? 16 : bytes <= 512 * KiB ? 32 : bytes <= 1024 * KiB ? 64 : sms;
      break;
    case Mode::kTwoShot:
      b = bytes <= 32 * KiB ? 8 : bytes <= 64 * KiB ? 16 : bytes <= 1024 * KiB ? 32 : bytes <= 8192 * KiB ? 64 : sms;
      break;
    default: {
      size_t q = bytes / KiB;
      b = q < 16 ? 16 : q > static_cast<size_t>(sms) ? sms : static_cast<int>(q);
      break;
    }
  }
  return b < 1 ? 1 : b > sms ? sms : b;
}

// LL one-shot: one 4-element line per thread while that fits in one wave of blocks (latency
// is the cost: no block should loop), then every SM.
int ll_default_blocks(size_t count, int sms) {
  const size_t lines = proto::ceil_div(count, proto::kLLLineElems);
  const size_t b = proto::ceil_div(lines, static_cast<size_t>(kernels::kThreads));
  return b < 1 ? 1 : b > static_cast<size_t>(sms) ? sms : static_cast<int>(b);
}

class CommImpl final : public Communicator {
 public:
  ~CommImpl() override {
    int prev = -1;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(device_);
    for (void* p : ipc_opened_) (void)cudaIpcCloseMemHandle(p);
    if (mem_) (void)cudaFree(mem_);
    if (err_host_) (void)cudaFreeHost(err_host_);
    if (own_nccl_ && nccl_) (void)ncclCommDestroy(nccl_);
    if (prev >= 0) (void)cudaSetDevice(prev);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int device() const override { return device_; }

  Mode resolve_mode(size_t count, DType dtype, const Options& opts) const override {
    if (!p2p_) return Mode::kNccl;
    if (opts.mode != Mode::kAuto) return opts.mode;
    return auto_mode(world_, count * 2, opts.precision);
  }

  Status check_peer_error() override {
    LOWBIT_CUDA_RETURN(cudaSetDevice(device_));
    cudaError_t e = cudaDeviceSynchronize();
    Status st = recorded_error();
    if (!st.ok()) return st;
    LOWBIT_CUDA_RETURN(e);
    return Status::Ok();
  }

  Status allreduce(const void* in, void* out, size_t count, DType dtype, const Options& opts,
                   cudaStream_t stream) override {
    LOWBIT_RETURN_IF_ERROR(recorded_error());
    LOWBIT_CHECK_ARG(dtype == DType::kF16 || dtype == DType::kBF16, "allreduce: dtype must be fp16 or bf16");
    if (count == 0) return Status::Ok();
    LOWBIT_CHECK_ARG(in != nullptr, "allreduce: input pointer is null (count %zu)", count);
    LOWBIT_CHECK_ARG(out != nullptr, "allreduce: output pointer is null (count %zu)", count);
    if (reinterpret_cast<uintptr_t>(in) % 16 != 0)
      return make_status(StatusCode::kMisaligned, "allreduce: input pointer %p is not 16-byte aligned", in);
    if (reinterpret_cast<uintptr_t>(out) % 16 != 0)
      return make_status(StatusCode::kMisaligned, "allreduce: output pointer %p is not 16-byte aligned", out);
    LOWBIT_CHECK_ARG(opts.mode >= Mode::kAuto && opts.mode <= Mode::kQ4Q4, "allreduce: invalid mode %d",
                     static_cast<int>(opts.mode));
    const Mode m = resolve_mode(count, dtype, opts);
    if (mode_is_quantized(m) || (opts.mode == Mode::kAuto && opts.precision != Precision::kExact)) {
      LOWBIT_CHECK_ARG(opts.group_size == 32 || opts.group_size == 64 || opts.group_size == 128,
                       "allreduce: group_size %d not in {32, 64, 128}", opts.group_size);
    }
    LOWBIT_CHECK_ARG(opts.num_sms >= 0, "allreduce: num_sms %d < 0", opts.num_sms);
    LOWBIT_CUDA_RETURN(cudaSetDevice(device_));
    if (m == Mode::kNccl) {
      LOWBIT_NCCL_RETURN(ncclAllReduce(in, out, count, nccl_type(dtype), ncclSum, nccl_, stream));
      return Status::Ok();
    }
    proto::StepCodec c1, c2;
    if (mode_is_quantized(m)) {
      c1 = {step1_codec(m, opts.group_size).bits, opts.group_size};
      c2 = {step2_codec(m, opts.group_size).bits, opts.group_size};
    }
    proto::Kind kind = m == Mode::kOneShot ? proto::Kind::kOneShot : proto::Kind::kTwoStep;
    // One-shot: the LL variant (flags in the data) for messages up to oneshot_ll_max_bytes.
    const bool ll = m == Mode::kOneShot && count * 2 <= cfg_.oneshot_ll_max_bytes &&
                    count <= proto::ll_max_count(areas_, world_);
    if (ll) kind = proto::Kind::kOneShotLL;
    int blocks = opts.num_sms > 0 ? opts.num_sms
                 : cfg_.default_num_sms > 0 ? cfg_.default_num_sms
                 : ll ? ll_default_blocks(count, sms_)
                      : default_blocks(m, count * 2, sms_);
    if (blocks > proto::kMaxTiles) blocks = proto::kMaxTiles;
    kernels::KernelArgs a{};
    // A small Config::buffer_bytes may not hold a unit per tile for many tiles: use fewer.
    while (!proto::make_plan(kind, c1, c2, world_, blocks, count, areas_, &a.plan)) {
      if (blocks == 1)
        return make_status(StatusCode::kInvalidArgument,
                           "allreduce: Config::buffer_bytes %zu too small for mode %s with %d ranks", cfg_.buffer_bytes,
                           mode_name(m), world_);
      blocks /= 2;
    }
    if (mode_is_quantized(m) && count * 2 >= cfg_.quant_split_min_bytes) a.plan.kind = proto::Kind::kTwoStepSplit;
    a.areas = areas_;
    a.rank = rank_;
    a.nranks = world_;
    a.dtype = dtype;
    a.in = static_cast<const uint16_t*>(in);
    a.out = static_cast<uint16_t*>(out);
    for (int r = 0; r < world_; ++r) a.base[r] = peers_[static_cast<size_t>(r)];
    a.err = err_dev_;
    a.timeout_ns = static_cast<uint64_t>(cfg_.timeout_ms) * 1000000ull;
    a.trace = opts.debug_phase_ns;
    return kernels::launch_allreduce(m, opts.group_size, a, stream);
  }

  // ---- construction --------------------------------------------------------------------
  Status init_local(int rank, int world, int device, const Config& cfg) {
    LOWBIT_CHECK_ARG(world >= 1 && world <= proto::kMaxRanks, "allreduce: world size %d not in 1..%d", world,
                     proto::kMaxRanks);
    LOWBIT_CHECK_ARG(cfg.timeout_ms > 0, "allreduce: Config::timeout_ms %d must be > 0", cfg.timeout_ms);
    LOWBIT_CHECK_ARG(cfg.buffer_bytes >= (64u << 10), "allreduce: Config::buffer_bytes %zu < 64 KiB",
                     cfg.buffer_bytes);
    rank_ = rank, world_ = world, device_ = device, cfg_ = cfg;
    areas_ = proto::make_areas(cfg.buffer_bytes);
    LOWBIT_CUDA_RETURN(cudaSetDevice(device));
    LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    LOWBIT_CUDA_RETURN(cudaMalloc(&mem_, areas_.total_bytes));
    // Control words start at zero (epochs start at 1); staging contents never matter.
    LOWBIT_CUDA_RETURN(cudaMemset(mem_, 0, proto::kControlBytes));
    // LL lines must start with a flag no epoch (>= 1) carries.
    LOWBIT_CUDA_RETURN(cudaMemset(static_cast<uint8_t*>(mem_) + areas_.ll_offset, 0, areas_.ll_bytes));
    LOWBIT_CUDA_RETURN(cudaHostAlloc(&err_host_, sizeof(proto::ErrorRecord), cudaHostAllocMapped));
    std::memset(err_host_, 0, sizeof(proto::ErrorRecord));
    LOWBIT_CUDA_RETURN(cudaHostGetDevicePointer(reinterpret_cast<void**>(&err_dev_), err_host_, 0));
    LOWBIT_CUDA_RETURN(cudaDeviceSynchronize());
    peers_.assign(static_cast<size_t>(world), nullptr);
    peers_[static_cast<size_t>(rank)] = static_cast<uint8_t*>(mem_);
    return Status::Ok();
  }

  Status recorded_error() const {
    const volatile proto::ErrorRecord* r = err_host_;
    if (r == nullptr || r->set == 0) return Status::Ok();
    const char* step = r->step == proto::kStepOneShot        ? "0 (one-shot)"
                       : r->step == proto::kStepReduceScatter ? "1 (reduce-scatter)"
                                                              : "2 (all-gather)";
    return make_status(StatusCode::kTimeout,
                       "rank %d: peer rank %d never arrived at step %s (chunk %lld, block %d) within %d ms; the "
                       "communicator is unusable, recreate it on every rank",
                       r->rank, r->peer, step, static_cast<long long>(r->chunk), r->tile, cfg_.timeout_ms);
  }

  int rank_ = 0, world_ = 1, device_ = 0, sms_ = 132;
  Config cfg_;
  proto::Areas areas_{};
  void* mem_ = nullptr;
  proto::ErrorRecord* err_host_ = nullptr;
  proto::ErrorRecord* err_dev_ = nullptr;
  std::vector<uint8_t*> peers_;
  std::vector<void*> ipc_opened_;
  bool p2p_ = false;
  ncclComm_t nccl_ = nullptr;
  bool own_nccl_ = false;
};

uint64_t host_hash() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char* p = name; *p; ++p) h = (h ^ static_cast<uint8_t>(*p)) * 1099511628211ull;
  return h;
}

struct PeerInfo {
  cudaIpcMemHandle_t handle;
  char bus_id[32];
  uint64_t host;
  int32_t ok;  // this rank could open every peer's buffer
  int32_t pad;
};

}  // namespace

Status Communicator::create_single_process(const std::vector<int>& devices, const Config& cfg,
                                           std::vector<std::unique_ptr<Communicator>>* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "create_single_process: out is null");
  const int n = static_cast<int>(devices.size());
  LOWBIT_CHECK_ARG(n >= 1 && n <= proto::kMaxRanks, "create_single_process: %d devices (1..%d)", n, proto::kMaxRanks);
  int prev = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&prev));
  std::vector<std::unique_ptr<CommImpl>> comms;
  for (int r = 0; r < n; ++r) {
    comms.emplace_back(new CommImpl());
    LOWBIT_RETURN_IF_ERROR(comms.back()->init_local(r, n, devices[static_cast<size_t>(r)], cfg));
  }
  bool p2p = true;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      int can = 0;
      LOWBIT_CUDA_RETURN(cudaDeviceCanAccessPeer(&can, devices[static_cast<size_t>(a)], devices[static_cast<size_t>(b)]));
      if (!can) p2p = false;
    }
  }
  if (p2p) {
    for (int a = 0; a < n; ++a) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(devices[static_cast<size_t>(a)]));
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        cudaError_t e = cudaDeviceEnablePeerAccess(devices[static_cast<size_t>(b)], 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else LOWBIT_CUDA_RETURN(e);
      }
    }
  }
  std::vector<ncclComm_t> nc(static_cast<size_t>(n));
  LOWBIT_NCCL_RETURN(ncclCommInitAll(nc.data(), n, devices.data()));
  out->clear();
  for (int r = 0; r < n; ++r) {
    CommImpl* c = comms[static_cast<size_t>(r)].get();
    c->nccl_ = nc[static_cast<size_t>(r)];
    c->own_nccl_ = true;
    c->p2p_ = p2p;
    for (int q = 0; q < n; ++q) c->peers_[static_cast<size_t>(q)] = static_cast<uint8_t*>(comms[static_cast<size_t>(q)]->mem_);
  }
  for (auto& c : comms) out->emplace_back(c.release());
  LOWBIT_CUDA_RETURN(cudaSetDevice(prev));
  return Status::Ok();
}

Status Communicator::create_from_nccl(ncclComm_t comm, const Config& cfg, std::unique_ptr<Communicator>* out) {
  LOWBIT_CHECK_ARG(comm != nullptr && out != nullptr, "create_from_nccl: null comm or out");
  int n = 0, rank = 0, dev = 0;
  LOWBIT_NCCL_RETURN(ncclCommCount(comm, &n));
  LOWBIT_NCCL_RETURN(ncclCommUserRank(comm, &rank));
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  std::unique_ptr<CommImpl> c(new CommImpl());
  LOWBIT_RETURN_IF_ERROR(c->init_local(rank, n, dev, cfg));
  c->nccl_ = comm;
  c->own_nccl_ = false;

  PeerInfo mine{};
  LOWBIT_CUDA_RETURN(cudaIpcGetMemHandle(&mine.handle, c->mem_));
  LOWBIT_CUDA_RETURN(cudaDeviceGetPCIBusId(mine.bus_id, sizeof mine.bus_id, dev));
  mine.host = host_hash();
  // Exchange through a small device buffer (NCCL moves device memory only).
  std::vector<PeerInfo> all(static_cast<size_t>(n));
  void* dbuf = nullptr;
  cudaStream_t s = nullptr;
  LOWBIT_CUDA_RETURN(cudaMalloc(&dbuf, sizeof(PeerInfo) * static_cast<size_t>(n)));
  std::unique_ptr<void, void (*)(void*)> free_dbuf(dbuf, [](void* p) { (void)cudaFree(p); });
  LOWBIT_CUDA_RETURN(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> free_s(s, [](cudaStream_t x) { (void)cudaStreamDestroy(x); });
  auto exchange = [&]() -> Status {
    uint8_t* slot = static_cast<uint8_t*>(dbuf) + sizeof(PeerInfo) * static_cast<size_t>(rank);
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(slot, &mine, sizeof mine, cudaMemcpyHostToDevice, s));
    LOWBIT_NCCL_RETURN(ncclAllGather(slot, dbuf, sizeof(PeerInfo), ncclUint8, comm, s));
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(all.data(), dbuf, sizeof(PeerInfo) * static_cast<size_t>(n),
                                       cudaMemcpyDeviceToHost, s));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(s));
    return Status::Ok();
  };
  LOWBIT_RETURN_IF_ERROR(exchange());
  bool ok = true;
  for (int q = 0; q < n && ok; ++q) {
    if (q == rank) continue;
    const PeerInfo& pi = all[static_cast<size_t>(q)];
    if (pi.host != mine.host) {
      ok = false;
      break;
    }
    int qdev = -1;
    if (cudaDeviceGetByPCIBusId(&qdev, pi.bus_id) == cudaSuccess) {
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, dev, qdev) != cudaSuccess || !can) ok = false;
    } else {
      (void)cudaGetLastError();  // peer GPU not visible here; IPC may still work
    }
    if (!ok) break;
    void* p = nullptr;
    if (cudaIpcOpenMemHandle(&p, pi.handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      (void)cudaGetLastError();
      ok = false;
      break;
    }
    c->ipc_opened_.push_back(p);
    c->peers_[static_cast<size_t>(q)] = static_cast<uint8_t*>(p);
  }
  // Every rank must agree: one rank that cannot map a peer makes everyone use NCCL.
  mine.ok = ok ? 1 : 0;
  LOWBIT_RETURN_IF_ERROR(exchange());
  bool all_ok = true;
  for (const PeerInfo& pi : all) all_ok = all_ok && pi.ok == 1;
  if (!all_ok) {
    for (void* p : c->ipc_opened_) (void)cudaIpcCloseMemHandle(p);
    c->ipc_opened_.clear();
  }
  c->p2p_ = all_ok;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace lowbit::allreduce
