// The streamed safetensors writer (tensor by tensor, header reserved or copied behind) and
// sharded checkpoints (an index and its shards, a directory, one file): the same bytes as
// the all-at-once writer, and every inconsistency between an index and its shards is an
// error naming the tensor and the files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "lowbit/io/safetensors.h"

using namespace lowbit;
using namespace lowbit::io;

namespace {

std::string tmp_dir(const std::string& tag) {
  const std::string d = ::testing::TempDir() + "lowbit_sh_" + tag + "_" + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0755);
  return d;
}

bool exists(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0;
}

void write_text(const std::string& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

void remove_dir(const std::string& d, const std::vector<std::string>& files) {
  for (const auto& f : files) std::remove((d + "/" + f).c_str());
  ::rmdir(d.c_str());
}

// Three tensors of distinct bytes: a [i] = 3i + 1 + salt.
struct Tensors {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorToWrite> list;
  explicit Tensors(const std::vector<std::string>& names, int salt = 0) {
    for (size_t t = 0; t < names.size(); ++t) {
      bytes.emplace_back(12 + 4 * t);
      for (size_t i = 0; i < bytes.back().size(); ++i) bytes.back()[i] = static_cast<uint8_t>(3 * i + 1 + salt + t);
    }
    for (size_t t = 0; t < names.size(); ++t)
      list.push_back({names[t], TensorDType::kI32, {static_cast<int64_t>(bytes[t].size() / 4)}, bytes[t].data()});
  }
};

void expect_tensor(const SafetensorsCheckpoint& c, const TensorToWrite& want) {
  const TensorInfo* t = nullptr;
  ASSERT_TRUE(c.find(want.name, &t).ok()) << want.name;
  ASSERT_EQ(t->shape, want.shape);
  ASSERT_NE(c.data(*t), nullptr);
  EXPECT_EQ(std::memcmp(c.data(*t), want.data, t->nbytes), 0) << want.name;
}

}  // namespace

// Streamed with a reserve that holds the header, and with one too small for it (the data then
// copied behind the header): both read back the same tensors and metadata as the all-at-once
// writer's file.
TEST(SafetensorsWriter, StreamedFilesReadBack) {
  const std::string d = tmp_dir("w");
  Tensors t({"b.weight", "a.weight", "c.bias"});
  for (size_t reserve : {size_t{4096}, size_t{16}}) {
    const std::string p = d + "/out.safetensors";
    SafetensorsWriter w;
    ASSERT_TRUE(w.open(p, reserve).ok());
    for (const auto& x : t.list) ASSERT_TRUE(w.add(x).ok());
    EXPECT_FALSE(exists(p)) << "the output appears only once it is complete";
    ASSERT_TRUE(w.finish({{"k", "v"}}).ok());
    EXPECT_FALSE(exists(p + ".partial"));
    EXPECT_FALSE(exists(p + ".partial2"));
    SafetensorsFile f;
    Status st = SafetensorsFile::open(p, &f);
    ASSERT_TRUE(st.ok()) << "reserve " << reserve << ": " << st.to_string();
    EXPECT_EQ(f.metadata().at("k"), "v");
    ASSERT_EQ(f.tensors().size(), 3u);
    for (const auto& x : t.list) {
      const TensorInfo* i = nullptr;
      ASSERT_TRUE(f.find(x.name, &i).ok());
      EXPECT_EQ(std::memcmp(f.data(*i), x.data, i->nbytes), 0) << x.name << " reserve " << reserve;
    }
    std::remove(p.c_str());
  }
  remove_dir(d, {});
}

// A writer that fails (duplicate name) or is dropped before finish() leaves no file behind.
TEST(SafetensorsWriter, FailedOrAbandonedWritesLeaveNothing) {
  const std::string d = tmp_dir("wf");
  const std::string p = d + "/out.safetensors";
  Tensors t({"x", "x"});
  {
    SafetensorsWriter w;
    ASSERT_TRUE(w.open(p).ok());
    ASSERT_TRUE(w.add(t.list[0]).ok());
    const Status st = w.add(t.list[1]);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("duplicate tensor name 'x'"), std::string::npos) << st.message();
    EXPECT_FALSE(w.finish().ok()) << "a failed writer is closed";
  }
  EXPECT_FALSE(exists(p));
  EXPECT_FALSE(exists(p + ".partial"));
  {
    SafetensorsWriter w;
    ASSERT_TRUE(w.open(p).ok());
    ASSERT_TRUE(w.add(t.list[0]).ok());
    EXPECT_TRUE(exists(p + ".partial"));
  }
  EXPECT_FALSE(exists(p));
  EXPECT_FALSE(exists(p + ".partial"));
  SafetensorsWriter w;
  EXPECT_EQ(w.open(d + "/no/such/dir.safetensors").code(), StatusCode::kIoError);
  remove_dir(d, {});
}

// An index over three shards, opened as the index file and as its directory; a directory of
// shards without an index; one file; and a directory that is not a regular file for open().
TEST(SafetensorsCheckpoint, IndexDirectoryAndSingleFile) {
  const std::string d = tmp_dir("ok");
  Tensors a({"layers.0.q", "layers.0.k"}, 0), b({"layers.1.q"}, 50), c({"lm_head", "norm"}, 90);
  ASSERT_TRUE(write_safetensors(d + "/model-00001-of-00003.safetensors", a.list).ok());
  ASSERT_TRUE(write_safetensors(d + "/model-00002-of-00003.safetensors", b.list).ok());
  ASSERT_TRUE(write_safetensors(d + "/model-00003-of-00003.safetensors", c.list).ok());
  write_text(d + "/model.safetensors.index.json",
             R"({"metadata": {"total_size": 96}, "weight_map": {"layers.0.q": "model-00001-of-00003.safetensors",
             "layers.0.k": "model-00001-of-00003.safetensors", "layers.1.q": "model-00002-of-00003.safetensors",
             "lm_head": "model-00003-of-00003.safetensors", "norm": "model-00003-of-00003.safetensors"}})");
  for (const std::string& path : {d + "/model.safetensors.index.json", d}) {
    SafetensorsCheckpoint ck;
    Status st = SafetensorsCheckpoint::open(path, &ck);
    ASSERT_TRUE(st.ok()) << path << ": " << st.to_string();
    EXPECT_EQ(ck.shard_paths().size(), 3u);
    EXPECT_EQ(ck.tensors().size(), 5u);
    for (const Tensors* t : {&a, &b, &c})
      for (const auto& x : t->list) expect_tensor(ck, x);
    const TensorInfo* i = nullptr;
    EXPECT_EQ(ck.find("missing", &i).code(), StatusCode::kInvalidArgument);
  }
  std::remove((d + "/model.safetensors.index.json").c_str());
  {
    SafetensorsCheckpoint ck;  // no index: every shard of the directory
    ASSERT_TRUE(SafetensorsCheckpoint::open(d, &ck).ok());
    EXPECT_EQ(ck.tensors().size(), 5u);
    expect_tensor(ck, b.list[0]);
  }
  {
    SafetensorsCheckpoint ck;  // one file
    ASSERT_TRUE(SafetensorsCheckpoint::open(d + "/model-00002-of-00003.safetensors", &ck).ok());
    EXPECT_EQ(ck.tensors().size(), 1u);
    expect_tensor(ck, b.list[0]);
  }
  SafetensorsFile f;
  const Status st = SafetensorsFile::open(d, &f);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
  remove_dir(d, {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                 "model-00003-of-00003.safetensors"});
}

// Every way an index and its shards can disagree names the tensor and the files.
TEST(SafetensorsCheckpoint, InconsistentShardsAreNamed) {
  const std::string d = tmp_dir("bad");
  Tensors a({"t.a", "t.b"}, 0), b({"t.c"}, 10), dup({"t.a"}, 20);
  ASSERT_TRUE(write_safetensors(d + "/s1.safetensors", a.list).ok());
  ASSERT_TRUE(write_safetensors(d + "/s2.safetensors", b.list).ok());
  const std::string idx = d + "/model.safetensors.index.json";
  auto expect_error = [&](const std::string& index_text, const std::string& needle) {
    write_text(idx, index_text);
    SafetensorsCheckpoint ck;
    const Status st = SafetensorsCheckpoint::open(idx, &ck);
    EXPECT_FALSE(st.ok()) << index_text;
    EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message() << "\nlacks: " << needle;
  };
  expect_error(R"({"weight_map": {"t.a": "s1.safetensors", "t.b": "s1.safetensors", "t.c": "s1.safetensors"}})",
               "places tensor 't.c' in shard 's1.safetensors', which has no such tensor");
  expect_error(R"({"weight_map": {"t.a": "s1.safetensors", "t.b": "s2.safetensors", "t.c": "s2.safetensors"}})",
               "tensor 't.b' is in shard 's1.safetensors' but the index 'model.safetensors.index.json' places it in "
               "'s2.safetensors'");
  expect_error(R"({"weight_map": {"t.a": "s1.safetensors", "t.c": "s2.safetensors"}})",
               "tensor 't.b' is in shard 's1.safetensors' but the index 'model.safetensors.index.json' does not list it");
  expect_error(R"({"weight_map": {"t.a": "s1.safetensors", "t.b": "s1.safetensors", "t.c": "s3.safetensors"}})",
               "s3.safetensors");
  expect_error(R"({"weight_map": {"t.a": "../s1.safetensors"}})", "expected a file name in its directory");
  expect_error(R"({"weight_map": {}})", "no \"weight_map\"");
  expect_error(R"({"weight_map": {"t.a": 3}})", "expected a file name");
  expect_error("[1, 2", "not a JSON object");
  std::remove(idx.c_str());
  // No index: the same tensor in two shards.
  ASSERT_TRUE(write_safetensors(d + "/s3.safetensors", dup.list).ok());
  SafetensorsCheckpoint ck;
  Status st = SafetensorsCheckpoint::open(d, &ck);
  EXPECT_NE(st.message().find("tensor 't.a' is in two shards, 's1.safetensors' and 's3.safetensors'"),
            std::string::npos)
      << st.message();
  // Two index files: which one is meant is not guessed.
  write_text(d + "/a.safetensors.index.json", "{}");
  write_text(d + "/b.safetensors.index.json", "{}");
  st = SafetensorsCheckpoint::open(d, &ck);
  EXPECT_NE(st.message().find("2 index files"), std::string::npos) << st.message();
  // A corrupt shard is reported with its path.
  write_text(d + "/s2.safetensors", "garbage!");
  std::remove((d + "/a.safetensors.index.json").c_str());
  std::remove((d + "/b.safetensors.index.json").c_str());
  std::remove((d + "/s3.safetensors").c_str());
  st = SafetensorsCheckpoint::open(d, &ck);
  EXPECT_EQ(st.code(), StatusCode::kCorruptData);
  EXPECT_NE(st.message().find("s2.safetensors"), std::string::npos) << st.message();
  const std::string empty = tmp_dir("empty");
  st = SafetensorsCheckpoint::open(empty, &ck);
  EXPECT_NE(st.message().find("holds no .safetensors file"), std::string::npos) << st.message();
  EXPECT_EQ(SafetensorsCheckpoint::open(d + "/nope", &ck).code(), StatusCode::kIoError);
  remove_dir(empty, {});
  remove_dir(d, {"s1.safetensors", "s2.safetensors"});
}

// Mutated indexes (random bytes, structural characters, truncations) over valid shards give a
// Status or a consistent checkpoint, never a crash (run under ASan / UBSan in CI).
TEST(SafetensorsCheckpoint, MutatedIndexesNeverCrash) {
  const std::string d = tmp_dir("fuzz");
  Tensors a({"t.a", "t.b"}, 0), b({"t.c"}, 10);
  ASSERT_TRUE(write_safetensors(d + "/s1.safetensors", a.list).ok());
  ASSERT_TRUE(write_safetensors(d + "/s2.safetensors", b.list).ok());
  const std::string good =
      R"({"metadata": {"total_size": 40}, "weight_map": {"t.a": "s1.safetensors", "t.b": "s1.safetensors", "t.c": "s2.safetensors"}})";
  const std::string idx = d + "/model.safetensors.index.json";
  std::mt19937 rng(11);
  int opened = 0, refused = 0;
  for (int it = 0; it < 300; ++it) {
    std::string m = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !m.empty(); ++e) {
      const size_t at = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[at] = static_cast<char>(rng()); break;
        case 1: m[at] = "{}[]\":,/.0"[rng() % 10]; break;
        case 2: m.erase(at, 1 + rng() % 8); break;
        default: m.resize(at); break;
      }
    }
    write_text(idx, m);
    SafetensorsCheckpoint ck;
    const Status st = SafetensorsCheckpoint::open(idx, &ck);
    if (st.ok()) {
      ++opened;  // whatever opened is consistent: every tensor readable from its shard
      for (const auto& [name, t] : ck.tensors()) EXPECT_NE(ck.data(t), nullptr) << name;
    } else {
      ++refused;
      EXPECT_FALSE(st.message().empty());
    }
  }
  EXPECT_GT(refused, 0);
  std::remove(idx.c_str());
  remove_dir(d, {"s1.safetensors", "s2.safetensors"});
}
