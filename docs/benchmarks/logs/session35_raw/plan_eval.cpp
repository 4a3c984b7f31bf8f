#include <cstdio>
#include <algorithm>
#include <vector>
#include "kernels/int4/pipelined_plan.h"
using namespace lowbit::int4::kern;
int main() {
  struct S { const char* n; int N, K; } shapes[] = {{"8b.qkv",6144,4096},{"8b.o",4096,4096},{"8b.gate_up",28672,4096},{"8b.down",4096,14336},
    {"70b.qkv",10240,8192},{"70b.o",8192,8192},{"70b.gate_up",57344,8192},{"70b.down",8192,28672}};
  const int sms = 132, nb = 2;
  for (int m : {32, 64}) for (auto& s : shapes) {
    const int bm = pipelined_rows(m, true);
    PipePlan p = pipelined_plan(m, s.N, s.K, bm, sms, nb);
    const int ks = s.K / 16;
    long long blocks = (long long)p.row_tiles * p.col_tiles * p.splits;
    // round-robin placement: block b on SM b % sms; per-SM loads
    std::vector<double> load(sms, 0); std::vector<int> cnt(sms, 0);
    for (long long b = 0; b < blocks; ++b) { int r = b % p.splits; int steps = std::min(p.split_steps, ks - r * p.split_steps); load[b % sms] += steps; cnt[b % sms]++; }
    double tmax = 0; for (int i = 0; i < sms; ++i) { double rate = cnt[i] >= 2 ? 1.25 : 1.0; tmax = std::max(tmax, load[i] / rate); }
    double bal = (double)p.row_tiles * p.col_tiles * ks / sms / 1.25;
    printf("M=%d %-12s bm=%d tiles=%d splits=%d steps=%d blocks=%lld  max-SM %.0f  balanced %.0f  ratio %.2f\n", m, s.n, bm, p.row_tiles*p.col_tiles, p.splits, p.split_steps, blocks, tmax, bal, bal / tmax);
  }
}
