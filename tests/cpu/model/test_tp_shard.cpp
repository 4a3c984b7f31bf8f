// The TP runner's Megatron split (runtime/model/tp_shard.cpp): shards cover every head and
// every intermediate row exactly once, query heads follow their KV groups, uneven counts go
// to the first ranks; unsupported splits are rejected with a message.
#include <gtest/gtest.h>

#include <initializer_list>
#include <tuple>

#include "lowbit/model/tp_runner.h"

namespace lowbit::model {
namespace {

LlamaConfig cfg(int nq, int nkv, int inter) {
  LlamaConfig c;
  c.n_heads = nq, c.n_kv_heads = nkv, c.intermediate = inter, c.head_dim = 64, c.hidden = nq * 64;
  return c;
}

TEST(TpShard, CoversEverythingOnceAndKeepsGroups) {
  for (auto [nq, nkv, inter] : std::initializer_list<std::tuple<int, int, int>>{
           {9, 3, 1536}, {32, 8, 14336}, {64, 8, 28672}, {12, 4, 101}, {8, 8, 7}})
    for (int tp : {1, 2, 3, 4}) {
      if (nkv < tp || inter < tp) continue;
      const LlamaConfig c = cfg(nq, nkv, inter);
      int q = 0, kv = 0, in = 0;
      for (int r = 0; r < tp; ++r) {
        TpShard s;
        ASSERT_TRUE(tp_shard(c, tp, r, &s).ok());
        EXPECT_EQ(s.q_head0, q);
        EXPECT_EQ(s.kv_head0, kv);
        EXPECT_EQ(s.inter0, in);
        EXPECT_EQ(s.n_q_heads, s.n_kv_heads * (nq / nkv));
        EXPECT_GE(s.n_kv_heads, nkv / tp);
        EXPECT_LE(s.n_kv_heads, nkv / tp + 1);
        EXPECT_LE(s.n_inter, inter / tp + 1);
        q += s.n_q_heads, kv += s.n_kv_heads, in += s.n_inter;
      }
      EXPECT_EQ(q, nq);
      EXPECT_EQ(kv, nkv);
      EXPECT_EQ(in, inter);
    }
}

TEST(TpShard, SmolLm2OverTwo) {
  TpShard a, b;
  ASSERT_TRUE(tp_shard(cfg(9, 3, 1536), 2, 0, &a).ok());
  ASSERT_TRUE(tp_shard(cfg(9, 3, 1536), 2, 1, &b).ok());
  EXPECT_EQ(a.n_kv_heads, 2);
  EXPECT_EQ(a.n_q_heads, 6);
  EXPECT_EQ(b.n_kv_heads, 1);
  EXPECT_EQ(b.n_q_heads, 3);
  EXPECT_EQ(b.q_head0, 6);
}

TEST(TpShard, RejectsUnsupported) {
  TpShard s;
  EXPECT_EQ(tp_shard(cfg(9, 3, 1536), 4, 0, &s).code(), StatusCode::kNotSupported);  // KV replication
  EXPECT_FALSE(tp_shard(cfg(9, 3, 1536), 2, 2, &s).ok());
  EXPECT_FALSE(tp_shard(cfg(9, 4, 1536), 2, 0, &s).ok());
  EXPECT_FALSE(tp_shard(cfg(9, 3, 1), 2, 0, &s).ok());
}

TEST(TpComm, ParsesNoneAndModes) {
  TpComm c;
  ASSERT_TRUE(parse_tp_comm("none", 64, &c).ok());
  EXPECT_TRUE(c.skip);
  EXPECT_EQ(tp_comm_name(c), "none");
  ASSERT_TRUE(parse_tp_comm("q4q8", 64, &c).ok());
  EXPECT_FALSE(c.skip);
  EXPECT_EQ(c.opts.mode, allreduce::Mode::kQ4Q8);
  EXPECT_EQ(c.opts.group_size, 64);
  EXPECT_EQ(tp_comm_name(c), "q4q8");
  EXPECT_FALSE(parse_tp_comm("int6", 64, &c).ok());
}

}  // namespace
}  // namespace lowbit::model
