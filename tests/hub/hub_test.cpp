// The hub client's pieces that need no server: hub ids, the environment, file selection (:quant), checksums
// and the cache layout huggingface_hub writes. Downloads are tested end to end against tests/hub/fake_hub.py
// by tests/cli/hub.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dllm/error.h"
#include "hub/cache.h"
#include "hub/digest.h"
#include "hub/hub_ref.h"
#include "hub/select.h"

namespace dllm::hub {
namespace {
namespace fs = std::filesystem;

TEST(HubRef, ParsesOrgNameRevisionAndQuant) {
  auto r = parse_hub_ref("inclusionAI/LLaDA2.1-mini");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "inclusionAI/LLaDA2.1-mini");
  EXPECT_EQ(r->revision, "main");
  EXPECT_EQ(r->file, "");
  r = parse_hub_ref("org/name-GGUF@v1.0:Q4_K_M");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "org/name-GGUF");
  EXPECT_EQ(r->revision, "v1.0");
  EXPECT_EQ(r->file, "Q4_K_M");
  EXPECT_EQ(r->text(), "org/name-GGUF@v1.0:Q4_K_M");
  r = parse_hub_ref("org/name:model-q8_0.gguf");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->file, "model-q8_0.gguf");
}

TEST(HubRef, PathsAreNotIds) {
  for (const char* s : {"models/demo/", "./models/demo", "/abs/path", "a/b/c", "model.gguf", "org/..", "../x",
                        "org/name@", "org/name:", "org/na me", "org/name:../../etc", ".org/name"})
    EXPECT_FALSE(parse_hub_ref(s)) << s;
}

TEST(HubSettings, EnvironmentAsHuggingfaceHubReadsIt) {
  const fs::path home = fs::temp_directory_path() / ("dllm_hub_env_" + std::to_string(::getpid()));
  fs::create_directories(home / "hf");
  std::ofstream(home / "hf" / "token") << "hf_fromfile\n";
  ::setenv("HOME", home.c_str(), 1);
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HF_HUB_CACHE");
  ::unsetenv("HUGGINGFACE_HUB_CACHE");
  ::unsetenv("HF_TOKEN");
  ::unsetenv("HF_TOKEN_PATH");
  ::unsetenv("HF_ENDPOINT");
  ::unsetenv("HF_HOME");
  ::unsetenv("HF_HUB_OFFLINE");
  HubSettings s = HubSettings::from_env();
  EXPECT_EQ(s.cache_dir, home.string() + "/.cache/huggingface/hub");
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_FALSE(s.offline);
  ::setenv("HF_HOME", (home / "hf").c_str(), 1);
  ::setenv("HF_ENDPOINT", "http://mirror.example/", 1);
  ::setenv("HF_HUB_OFFLINE", "True", 1);
  s = HubSettings::from_env();
  EXPECT_EQ(s.cache_dir, (home / "hf" / "hub").string());
  EXPECT_EQ(s.token, "hf_fromfile");
  EXPECT_EQ(s.endpoint, "http://mirror.example");
  EXPECT_TRUE(s.offline);
  ::setenv("HF_HUB_CACHE", "/x/hub", 1);
  ::setenv("HF_TOKEN", "hf_env", 1);
  s = HubSettings::from_env();
  EXPECT_EQ(s.cache_dir, "/x/hub");
  EXPECT_EQ(s.token, "hf_env");
  for (const char* v : {"HF_HOME", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN"})
    ::unsetenv(v);
  fs::remove_all(home);
}

TEST(Select, CheckpointDirectoryGetsOnlyWhatTheEngineReads) {
  const Selection s =
      select_files({"README.md", "config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json",
                    "tokenizer_config.json", "modeling_llada.py", "model.gguf"},
                   *parse_hub_ref("a/b"));
  EXPECT_EQ(s.files, (std::vector<std::string>{"config.json", "tokenizer.json", "tokenizer_config.json",
                                               "model.safetensors"}));
  EXPECT_EQ(s.gguf, "");
  const Selection sharded =
      select_files({"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"},
                   *parse_hub_ref("a/b"));
  EXPECT_EQ(sharded.index, "model.safetensors.index.json");
}

TEST(Select, QuantPicksOneGgufAsLlamaCppDoes) {
  const std::vector<std::string> files = {"README.md",   "m-Q4_K_M.gguf",  "m-Q4_K_S.gguf",
                                          "m.Q8_0.gguf", "IQ4_K_M/m.gguf", "mmproj-m-f16.gguf"};
  EXPECT_EQ(select_files(files, *parse_hub_ref("a/b:Q4_K_M")).gguf, "m-Q4_K_M.gguf");
  EXPECT_EQ(select_files(files, *parse_hub_ref("a/b:q8_0")).gguf, "m.Q8_0.gguf");
  EXPECT_EQ(select_files({"tiny_f32.gguf", "tiny_q8_0.gguf"}, *parse_hub_ref("a/b:F32")).gguf,
            "tiny_f32.gguf");
  EXPECT_EQ(select_files(files, *parse_hub_ref("a/b:m-Q4_K_S.gguf")).files,
            std::vector<std::string>{"m-Q4_K_S.gguf"});
  try {
    select_files(files, *parse_hub_ref("a/b:Q4_K"));
    FAIL() << "Q4_K matched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it has: m-Q4_K_M.gguf, m-Q4_K_S.gguf, m.Q8_0.gguf, IQ4_K_M/m.gguf"),
              std::string::npos)
        << e.what();
  }
  try {
    select_files(files, *parse_hub_ref("a/b"));
    FAIL() << "no choice among several";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":QUANT"), std::string::npos) << e.what();
  }
  EXPECT_EQ(select_files({"only.gguf", "mmproj.gguf"}, *parse_hub_ref("a/b")).gguf, "only.gguf");
  EXPECT_THROW(select_files({"m-Q4_K_M-00001-of-00002.gguf", "m-Q4_K_M-00002-of-00002.gguf"},
                            *parse_hub_ref("a/b:m-Q4_K_M-00001-of-00002.gguf")),
               Error);
  EXPECT_THROW(select_files({"README.md", "model.bin"}, *parse_hub_ref("a/b")), Error);
}

TEST(Digest, MatchesTheHubsEtags) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // `git hash-object` of a file holding "hello\n".
  Digest git(Digest::Kind::kGitBlob, 6);
  git.update("hello\n", 6);
  EXPECT_EQ(git.hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(Digest::kind_for_etag(std::string(64, 'a')), Digest::Kind::kSha256);
  EXPECT_EQ(Digest::kind_for_etag(std::string(40, '0')), Digest::Kind::kGitBlob);
  EXPECT_EQ(Digest::kind_for_etag("cdn-1234"), Digest::Kind::kNone);
}

TEST(RepoCache, ReadsAndWritesHuggingfaceHubsLayout) {
  const fs::path dir = fs::temp_directory_path() / ("dllm_hub_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const RepoCache cache(dir.string(), "org/name");
  EXPECT_EQ(cache.dir(), dir.string() + "/models--org--name");
  EXPECT_FALSE(cache.commit_for("main"));
  const std::string commit(40, 'c');
  EXPECT_EQ(cache.commit_for(commit), commit);
  cache.make_writable_dirs();
  cache.write_ref("main", commit);
  EXPECT_EQ(cache.commit_for("main"), commit);
  std::ofstream(cache.blob_path("e1")) << "x";
  cache.link(commit, "sub/dir/file.json", "e1");
  cache.link(commit, "gone.bin", "e2");  // a link to a blob that is not there is no file
  EXPECT_EQ(fs::read_symlink(cache.snapshot_dir(commit) + "/sub/dir/file.json").string(),
            "../../../../blobs/e1");
  EXPECT_EQ(cache.snapshot_files(commit), std::vector<std::string>{"sub/dir/file.json"});
  std::ofstream(cache.blob_path("e3") + ".incomplete") << "partial";
  const auto list = list_cache(dir.string());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].repo, "org/name");
  EXPECT_EQ(list[0].refs.at("main"), commit);
  EXPECT_EQ(list[0].bytes, 1u);
  EXPECT_EQ(list[0].partial_bytes, 7u);
  fs::remove_all(dir);
}

TEST(Select, ShardsComeFromTheIndex) {
  const fs::path p = fs::temp_directory_path() / ("dllm_hub_index_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << R"({"metadata": {}, "weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors",
                          "c": "m-2.safetensors"}})";
  EXPECT_EQ(shards_in_index(p.string()), (std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"}));
  std::ofstream(p) << R"({"weight_map": {"a": "../../etc/passwd"}})";
  EXPECT_THROW(shards_in_index(p.string()), Error);
  fs::remove(p);
}

}  // namespace
}  // namespace dllm::hub
