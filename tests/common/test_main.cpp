// Shared main for the test binaries. A binary built with LOWBIT_TEST_MIN_GPUS > 0 checks
// the GPUs first: with too few it prints "SKIPPED: ..." (ctest reports the binary as
// Skipped) and exits 0, so CI machines without a GPU pass cleanly and say so.
#include <gtest/gtest.h>

#include <cstdio>

#if LOWBIT_HAS_CUDA
#include <cuda_runtime.h>
#endif

#ifndef LOWBIT_TEST_MIN_GPUS
#define LOWBIT_TEST_MIN_GPUS 0
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (LOWBIT_TEST_MIN_GPUS > 0) {
    int n = 0;
#if LOWBIT_HAS_CUDA
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
#endif
    if (n < LOWBIT_TEST_MIN_GPUS) {
      std::printf("SKIPPED: %s needs %d CUDA GPU(s), found %d; its %d tests were not run\n", argv[0],
                  LOWBIT_TEST_MIN_GPUS, n, ::testing::UnitTest::GetInstance()->total_test_count());
      return 0;
    }
  }
  return RUN_ALL_TESTS();
}
