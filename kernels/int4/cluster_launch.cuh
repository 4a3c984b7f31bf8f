// Launching a split-K kernel whose splits form one thread-block cluster along grid.x
// (shared by gemm_decode.cu and skinny_tile.cuh). A cluster size the device cannot
// co-schedule (probed once per kernel, size and device with cudaOccupancyMaxActiveClusters:
// not a stream operation, so fine under graph capture) falls back to the next smaller one;
// the kernels give the same result for any split count up to their fixed-order fp32 sums.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace lowbit::int4::kern {

constexpr int kClusterMaxSplits = 8;   // portable cluster size
constexpr int kClusterMaxDevices = 16; // per-device cache (later devices share the last slot)

// A launch configuration with clusters of `splits` blocks along x, `cluster_y` deep along y
// (grid_y a multiple of it; no cluster attribute when both are 1); `attr` must outlive the
// configuration.
inline cudaLaunchConfig_t split_cluster_config(cudaLaunchAttribute* attr, int splits, unsigned tiles, unsigned grid_y,
                                               unsigned grid_z, unsigned threads, size_t smem, cudaStream_t stream,
                                               int cluster_y = 1) {
  cudaLaunchConfig_t cfg = {};
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(splits);
  attr->val.clusterDim.y = static_cast<unsigned>(cluster_y);
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = splits * cluster_y > 1 ? 1 : 0;
  cfg.blockDim = dim3(threads, 1, 1);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.gridDim = dim3(tiles * static_cast<unsigned>(splits), grid_y, grid_z);
  return cfg;
}

// SM count of a device (cached; 132, the H200 the launch rules were measured on, when it
// cannot be read, e.g. sizing a workspace on a host without GPUs), and of the current one.
inline int sm_count(int dev) {
  static std::atomic<int> cache[kClusterMaxDevices] = {};
  std::atomic<int>& slot = cache[dev >= 0 && dev < kClusterMaxDevices ? dev : kClusterMaxDevices - 1];
  int v = slot.load(std::memory_order_relaxed);
  if (v == 0) {
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v < 1) {
      (void)cudaGetLastError();
      v = 132;
    }
    slot.store(v, std::memory_order_relaxed);
  }
  return v;
}
inline int current_sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    dev = 0;
  }
  return sm_count(dev);
}

// One per kernel instantiation and cluster shape family (the caller keeps it static): per
// device and cluster size, the clusters the device runs at once; 0 unknown, -1 none.
using ClusterSchedulable = std::atomic<int>[kClusterMaxDevices][kClusterMaxSplits + 1];

// Clusters of `splits` x `cluster_y` blocks of `kernel` (this block shape, a grid of (tiles *
// splits, grid_y, grid_z)) the current device runs at once, probed once per device and size
// (splits * cluster_y <= kClusterMaxSplits) with cudaOccupancyMaxActiveClusters (not a stream
// operation: fine under graph capture); 0 when it cannot run them at all.
template <typename Kernel>
int active_clusters(Kernel kernel, int splits, unsigned tiles, unsigned grid_y, unsigned grid_z, unsigned threads,
                    size_t smem, ClusterSchedulable& known, int cluster_y = 1) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (dev < 0 || dev >= kClusterMaxDevices) dev = kClusterMaxDevices - 1;  // shared slot: correct, may re-probe
  std::atomic<int>& k = known[dev][splits * cluster_y];
  int n = k.load(std::memory_order_relaxed);
  if (n == 0) {
    cudaLaunchAttribute la;
    const cudaLaunchConfig_t cfg =
        split_cluster_config(&la, splits, tiles, grid_y, grid_z, threads, smem, nullptr, cluster_y);
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess || n < 1) {
      (void)cudaGetLastError();  // clear; treat as not schedulable
      n = -1;
    }
    k.store(n, std::memory_order_relaxed);
  }
  return n > 0 ? n : 0;
}

// Largest cluster size <= splits that `kernel` can co-schedule with this block shape, for
// a grid of (tiles * s, grid_y, grid_z). Returns >= 1. With wave_blocks > 0 (the blocks the
// device holds at once), a grid that fits that wave also gets every one of its tiles * grid_y *
// grid_z clusters resident at once, or the last ones would run as a second wave (the pipelined
// launch's check; measured in session 36 on the decode kernel: llama3-70b.tp4.gate_up at M =
// 9..16 planned 56 clusters of 7 four-warp blocks, 392 of 396 slots, and took 41.1-41.9 us in
// two waves, against 22.2 at M = 8 and 29.5-30.0 in clusters of 6).
template <typename Kernel>
int schedulable_splits(Kernel kernel, int splits, unsigned tiles, unsigned grid_y, unsigned grid_z, unsigned threads,
                       size_t smem, ClusterSchedulable& known, long long wave_blocks = 0) {
  if (splits > kClusterMaxSplits) splits = kClusterMaxSplits;
  const long long clusters = static_cast<long long>(tiles) * grid_y * grid_z;
  auto fits = [&](int s) {
    const int act = active_clusters(kernel, s, tiles, grid_y, grid_z, threads, smem, known);
    return act > 0 && (wave_blocks <= 0 || clusters * s > wave_blocks || act >= clusters);
  };
  while (splits > 1 && !fits(splits)) --splits;
  return splits < 1 ? 1 : splits;
}

// Programmatic dependent launch of the decode kernel and of the MoE routing and sum kernels:
// on unless LOWBIT_INT4_PDL=0 (read once; for measurements).
inline bool env_on_unless_zero(const char* name) {  // a measurement switch: on unless name=0
  const char* e = std::getenv(name);
  return !(e != nullptr && std::strcmp(e, "0") == 0);
}
// A measurement knob with three settings: name=0 or name=2 as given, anything else (or unset) 1.
inline int env_012(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && (std::strcmp(e, "0") == 0 || std::strcmp(e, "2") == 0) ? (e[0] - '0') : 1;
}
inline bool pdl_enabled() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_PDL");
  return v;
}

// Appends the programmatic-dependent-launch attribute to cfg: `attrs` holds cfg's current
// attributes (cfg.numAttrs of them) and has room for one more. The kernel must issue
// griddepcontrol.wait before it touches memory that the previous kernel in the stream writes
// or reads.
inline void allow_programmatic_launch(cudaLaunchConfig_t& cfg, cudaLaunchAttribute* attrs) {
  attrs[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attrs;
  ++cfg.numAttrs;
}

// Launches kernel(args...) on a plain grid, as a programmatic dependent launch when
// pdl_enabled() (see allow_programmatic_launch).
template <typename... KArgs, typename... Args>
cudaError_t launch_programmatic(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                Args&&... args) {
  cudaLaunchAttribute la[1];
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (pdl_enabled()) allow_programmatic_launch(cfg, la);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Launches kernel(params) on a grid of (tiles * splits, grid_y, grid_z) with clusters of
// `splits` blocks along x and `cluster_y` along y (no cluster attribute when both are 1).
// programmatic: a programmatic dependent launch (see allow_programmatic_launch).
template <typename Kernel, typename Params>
cudaError_t launch_split_clusters(Kernel kernel, const Params& params, int splits, unsigned tiles, unsigned grid_y,
                                  unsigned grid_z, unsigned threads, size_t smem, cudaStream_t stream,
                                  bool programmatic = false, int cluster_y = 1) {
  cudaLaunchAttribute la[2];
  cudaLaunchConfig_t cfg = split_cluster_config(&la[0], splits, tiles, grid_y, grid_z, threads, smem, stream, cluster_y);
  if (programmatic) allow_programmatic_launch(cfg, la);
  return cudaLaunchKernelEx(&cfg, kernel, params);
}

}  // namespace lowbit::int4::kern
