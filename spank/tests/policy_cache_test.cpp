#include "policy_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/sha256.hpp"
#include "test_policy.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

// Every part of the format: zones with nodes, prefix entries, roles with and
// without partitions, bindings of each kind, [view] roots, defaults.
constexpr const char* kFullPolicy = R"([zones.ae]
description = "UAE"
nodes = ["node[1-2,5]", "login"]
[zones.eu]
nodes = ["gpu[01-16]x"]
[zones.us]

[view]
roots = ["/data/ae", "/data/eu/"]

[defaults]
unknown_datasets = "allow"

[[datasets]]
path = "/data/ae/fraud-*"
zone = "ae"
classification = "restricted"

[[datasets]]
path = "/data/ae/x"
zone = "ae"
classification = "internal"

[[datasets]]
path = "/data/eu/"
zone = "eu"
classification = "internal"

[[roles]]
name = "a"
zones = ["ae", "eu"]
classifications = ["internal", "restricted"]
max_gpus = 1000000
partitions = ["batch", "gpu"]

[[roles]]
name = "b"
zones = []
max_gpus = 0

[[bindings]]
group = "g"
roles = ["a", "b"]

[[bindings]]
account = "acct"
roles = ["b"]

[[bindings]]
user = "u"
roles = ["a"]
)";

// `datasets` entries under /data/<zone>/team<i % 100>/, every tenth a prefix
// entry, and `bindings` bindings of each kind in turn.
std::string GeneratedPolicy(int datasets, int bindings) {
  std::string t =
      "[zones.ae]\nnodes = [\"n[1-64]\"]\n[zones.eu]\n[view]\nroots = [\"/data/ae\", "
      "\"/data/eu\"]\n[defaults]\nrole = \"r\"\n";
  for (int i = 0; i < datasets; ++i) {
    const char* zone = i % 2 == 0 ? "ae" : "eu";
    fmt::format_to(std::back_inserter(t),
                   "[[datasets]]\npath = \"/data/{}/team{}/set{}{}\"\nzone = \"{}\"\n"
                   "classification = \"{}\"\n",
                   zone, i % 100, i, i % 10 == 0 ? "-*" : "", zone,
                   i % 3 == 0 ? "restricted" : "internal");
  }
  t += "[[roles]]\nname = \"r\"\nzones = [\"ae\", \"eu\"]\nclassifications = [\"internal\"]\n"
       "max_gpus = 8\n[[roles]]\nname = \"s\"\nzones = [\"ae\"]\nmax_gpus = 1\n"
       "partitions = [\"batch\"]\n";
  for (int j = 0; j < bindings; ++j)
    fmt::format_to(std::back_inserter(t), "[[bindings]]\n{} = \"n{}\"\nroles = [\"{}\"]\n",
                   j % 3 == 0   ? "user"
                   : j % 3 == 1 ? "group"
                                : "account",
                   j, j % 2 == 0 ? "r" : "s");
  return t;
}

std::string ExamplePolicy() {
  std::ifstream in(HPCML_GUARD_EXAMPLE_POLICY);
  EXPECT_TRUE(in) << HPCML_GUARD_EXAMPLE_POLICY;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Policy MustParse(std::string_view text) {
  auto p = ParsePolicy(text, "policy.toml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

// The position of an entry in its policy's datasets(), -1 for none.
long IndexOf(const std::optional<DatasetEntry>& e) {
  return e ? static_cast<long>(e->index) : -1;
}
std::vector<long> Indexes(const DatasetRange& entries) {
  std::vector<long> out;
  for (const DatasetEntry& e : entries) out.push_back(e.index);
  return out;
}

// The cache's bytes for `policy` with no file identity.
std::string Encode(const Policy& policy) {
  return EncodePolicyCache(policy, {}, {});
}

// Every accessor of `got` answers as `want`'s does.
void ExpectSamePolicy(const Policy& want, const Policy& got) {
  EXPECT_EQ(got.source(), want.source());
  EXPECT_EQ(got.sha256(), want.sha256());
  EXPECT_EQ(got.zones(), want.zones());
  EXPECT_EQ(got.names_nodes(), want.names_nodes());
  for (const char* node : {"node1", "node5", "node3", "login", "gpu07x", "gpu7x", "n64", "x"})
    EXPECT_EQ(got.ZonesOfNode(node), want.ZonesOfNode(node)) << node;
  EXPECT_TRUE(got.datasets() == want.datasets());  // paths, zones, classifications, lines
  EXPECT_TRUE(got.roles() == want.roles());
  EXPECT_TRUE(got.bindings() == want.bindings());
  EXPECT_EQ(got.default_role(), want.default_role());
  EXPECT_EQ(got.unknown_datasets(), want.unknown_datasets());
  EXPECT_EQ(got.view_roots(), want.view_roots());
  EXPECT_EQ(got.binds_groups(), want.binds_groups());
  EXPECT_EQ(got.binds_accounts(), want.binds_accounts());
  // The indexes: every entry is matched, and what lies below a sample of
  // directories, as the parsed policy has them.
  std::vector<std::string> dirs = {"/", "/data", "/data/ae", "/data/eu", "/data/ae/team7"};
  for (std::size_t i = 0; i < want.datasets().size(); ++i) {
    const std::string path(want.datasets()[i].path);
    for (const std::string& probe :
         {path, path + "x", path + "/y", path.substr(0, path.size() - 1)})
      ASSERT_EQ(IndexOf(got.MatchDataset(probe)), IndexOf(want.MatchDataset(probe))) << probe;
    if (i % 97 == 0) dirs.push_back(path);
  }
  for (const std::string& dir : dirs)
    EXPECT_EQ(Indexes(got.EntriesBelow(dir)), Indexes(want.EntriesBelow(dir))) << dir;
  for (const Binding& b : want.bindings())
    for (const auto& [role, unused] : want.roles())
      for (const std::optional<std::string>& account :
           {std::optional<std::string>(), std::optional<std::string>(b.name)}) {
        EXPECT_EQ(got.IsBound(role, b.name, {b.name}, account),
                  want.IsBound(role, b.name, {b.name}, account));
        EXPECT_EQ(got.IsBoundToPerson(role, b.name, {}), want.IsBoundToPerson(role, b.name, {}));
      }
  // And what the accessors do not show (the zones' node patterns, the
  // table's indexes): the same bytes once encoded again.
  EXPECT_TRUE(Encode(got) == Encode(want));
}

TEST(PolicyCache, RoundTripsEveryAccessor) {
  const std::string generated = GeneratedPolicy(10000, 1000);
  for (const std::string& text :
       {std::string(testing::kPolicy), std::string(kFullPolicy), ExamplePolicy(), generated}) {
    Policy parsed = MustParse(text);
    const PolicyFileIdentity file{1, 2, text.size(), 3, 4, 5, 6};
    std::string bytes = EncodePolicyCache(parsed, file, {7, 8});
    auto decoded = DecodePolicyCache(bytes, nullptr, "policy.toml");
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_EQ(decoded->policy.sha256(), Sha256::Hex(text));
    EXPECT_EQ(decoded->identity, file);
    EXPECT_EQ(decoded->read_at.tv_sec, 7);
    EXPECT_EQ(decoded->read_at.tv_nsec, 8);
    ExpectSamePolicy(parsed, decoded->policy);
  }
}

// The header and the rest are checksummed: any damage there is refused. The
// dataset table is used where it lies, checked for bounds only: damage there
// is refused or gives answers from within the block, never a read outside.
TEST(PolicyCache, EveryTruncationAndDamagedByteIsRefusedOrStaysInBounds) {
  Policy parsed = MustParse(GeneratedPolicy(40, 3));
  const std::string bytes = Encode(parsed);
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(DecodePolicyCache(bytes.substr(0, n), nullptr, "p").ok()) << n;
  EXPECT_FALSE(DecodePolicyCache(bytes + "x", nullptr, "p").ok());
  const std::size_t table_at = bytes.size() - parsed.dataset_table().bytes().size();
  int refused_in_table = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i >= 12 && i < 16) continue;  // the header's padding is not read
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x10);
    auto got = DecodePolicyCache(damaged, nullptr, "p");
    if (i < table_at) {
      EXPECT_FALSE(got.ok()) << i;
      continue;
    }
    if (!got.ok()) {
      ++refused_in_table;
      continue;
    }
    // Every kind of lookup answers within the block (each checks what it
    // reads; _GLIBCXX_ASSERTIONS checks each string_view taken from it).
    const DatasetTable& table = got->policy.dataset_table();
    for (const DatasetEntry& e : parsed.datasets()) {
      (void)got->policy.MatchDataset(std::string(e.path));
      (void)got->policy.MatchDataset(std::string(e.path) + "/x");
      (void)got->policy.EntriesBelow(e.path).size();
      (void)table.LowerBound(e.path);
    }
    for (std::uint32_t z = 0; z < table.zone_count(); ++z) {
      (void)table.ZoneName(z).size();
      for (std::uint32_t from = 0; from <= table.size(); from += 7) {
        std::uint32_t k = table.NextInZone(z, from);
        if (k < table.size()) (void)table.at(k).zone.size();
      }
    }
    for (const DatasetEntry& e : got->policy.datasets()) (void)e.path.size();
  }
  EXPECT_GT(refused_in_table, 0);
}

class PolicyCacheFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("guard_policy_cache_test." + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "etc");
    ::chmod(root_.c_str(), 0755);
    ::chmod((root_ / "etc").c_str(), 0755);
    path_ = (root_ / "etc" / "policy.toml").string();
    dir_ = (root_ / "run").string();  // created by the first write
    WritePolicy(kFullPolicy);
  }
  void TearDown() override { fs::remove_all(root_); }

  void WritePolicy(std::string_view text) {
    std::ofstream(path_, std::ios::trunc) << text;
    ::chmod(path_.c_str(), 0644);
  }
  PolicyFileIdentity Identity() const {
    struct stat st {};
    EXPECT_EQ(::stat(path_.c_str(), &st), 0);
    return PolicyFileIdentity::Of(st);
  }
  // The policy file's cache, by its identity (device and inode).
  std::string CacheOf() const { return PolicyCachePath(dir_, Identity()); }
  // A cache of `text` as compiled from the policy file now, its text read
  // `after` seconds after the file's ctime.
  std::string CacheFor(std::string_view text, int after) const {
    PolicyFileIdentity file = Identity();
    return EncodePolicyCache(MustParse(text), file, {file.ctime_sec + after, file.ctime_nsec});
  }
  Result<Policy> Load(std::string* note = nullptr) {
    return LoadPolicyCached(path_, dir_, ::geteuid(), note);
  }
  // Loads through the cache: the same as parsing, without a note.
  void ExpectCacheUsed() {
    std::string note;
    auto p = Load(&note);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(note, "");
    ExpectSamePolicy(*LoadPolicyFile(path_, ::geteuid()), *p);
  }
  static ino_t Inode(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  fs::path root_;
  std::string path_, dir_;
};

TEST_F(PolicyCacheFileTest, TheFirstLoadWritesTheCacheAndTheNextUsesIt) {
  ASSERT_FALSE(fs::exists(dir_));
  ExpectCacheUsed();  // a first write is no trouble: no note
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  const std::string cache = CacheOf();
  ASSERT_EQ(::lstat(cache.c_str(), &st), 0) << cache;
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0644u);  // the policy's own mode: readable by srun
  EXPECT_EQ(st.st_uid, ::geteuid());
  // A hit never writes: the same file.
  const ino_t inode = st.st_ino;
  ExpectCacheUsed();
  EXPECT_EQ(Inode(cache), inode);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(PolicyCacheFileTest, ABadCacheIsIgnoredAndWrittenAgain) {
  const std::string cache = CacheOf();
  const std::string good = CacheFor(kFullPolicy, 0);
  const std::string elsewhere = (root_ / "elsewhere.cache").string();
  struct Case {
    std::string name, note;
    std::function<void()> spoil;
  } cases[] = {
      {"another text's, compiled within 2 s of the file's change", "another text",
       [&] { ASSERT_TRUE(WriteFileAtomic(cache, CacheFor(testing::kPolicy, 1), 0600).ok()); }},
      {"another version", "format version",
       [&] {
         std::string b = good;
         b[8] = static_cast<char>(b[8] + 1);
         ASSERT_TRUE(WriteFileAtomic(cache, b, 0600).ok());
       }},
      {"truncated", "of payload", [&] { fs::resize_file(cache, good.size() - 3); }},
      {"truncated header", "shorter than its header", [&] { fs::resize_file(cache, 40); }},
      {"a damaged byte", "checksum mismatch",
       [&] {
         std::string b = good;
         b[200] = static_cast<char>(b[200] ^ 1);  // after the header, in the checksummed rest
         ASSERT_TRUE(WriteFileAtomic(cache, b, 0600).ok());
       }},
      {"not a cache", "not a policy cache",
       [&] { ASSERT_TRUE(WriteFileAtomic(cache, std::string(200, 'x'), 0600).ok()); }},
      {"group-writable", "writable by group or others",
       [&] { ASSERT_EQ(::chmod(cache.c_str(), 0620), 0); }},
      {"another owner", "owned by uid 65534",
       [&] { ASSERT_EQ(::chown(cache.c_str(), 65534, 65534), 0) << "the unit tests run as root"; }},
      {"a symlink to a good cache", cache,
       [&] {
         ASSERT_TRUE(WriteFileAtomic(elsewhere, good, 0600).ok());
         fs::remove(cache);
         fs::create_symlink(elsewhere, cache);
       }},
      {"a directory", "not a regular file",
       [&] {
         fs::remove(cache);
         fs::create_directory(cache);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectCacheUsed();  // written, or written again after the last case
    c.spoil();
    const ino_t spoiled = Inode(cache);
    std::string note;
    auto p = Load(&note);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ExpectSamePolicy(*LoadPolicyFile(path_, ::geteuid()), *p);
    EXPECT_NE(note.find("ignored the policy cache"), std::string::npos) << note;
    EXPECT_NE(note.find(c.note), std::string::npos) << note;
    if (c.name == "a directory") {
      // Not replaced (a rename cannot put a file over a directory).
      EXPECT_NE(note.find("cannot write"), std::string::npos) << note;
      fs::remove(cache);
      continue;
    }
    EXPECT_EQ(note.find("cannot write"), std::string::npos) << note;
    EXPECT_NE(note.find("(written again)"), std::string::npos) << note;
    EXPECT_NE(Inode(cache), spoiled);  // replaced by a good one
    ExpectCacheUsed();
  }
}

TEST_F(PolicyCacheFileTest, AnUnsafeDirectoryIsNeitherReadNorWritten) {
  ExpectCacheUsed();
  const std::string cache = CacheOf();
  const std::string real = (root_ / "real").string();
  struct Case {
    std::string name, note;
    std::function<void()> spoil, undo;
  } cases[] = {
      {"group-writable", "writable by group or others", [&] { ::chmod(dir_.c_str(), 0770); },
       [&] { ::chmod(dir_.c_str(), 0700); }},
      {"world-writable and sticky", "writable by group or others",
       [&] { ::chmod(dir_.c_str(), 01777); }, [&] { ::chmod(dir_.c_str(), 0700); }},
      {"another owner", "owned by uid 65534",
       [&] { ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0); },
       [&] { ASSERT_EQ(::chown(dir_.c_str(), ::geteuid(), ::getegid()), 0); }},
      {"a symlink", dir_,
       [&] {
         fs::rename(dir_, real);
         fs::create_directory_symlink(real, dir_);
       },
       [&] {
         fs::remove(dir_);
         fs::rename(real, dir_);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    c.spoil();
    std::string note;
    auto p = Load(&note);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ExpectSamePolicy(*LoadPolicyFile(path_, ::geteuid()), *p);
    EXPECT_NE(note.find("ignored the policy cache"), std::string::npos) << note;
    EXPECT_NE(note.find("cannot write the policy cache"), std::string::npos) << note;
    EXPECT_NE(note.find(c.note), std::string::npos) << note;
    c.undo();
    ExpectCacheUsed();
  }
}

TEST_F(PolicyCacheFileTest, ABrokenPolicyIsReportedAsTodayAndNeverCached) {
  const std::string broken =
      std::string(kFullPolicy) + "[[roles]]\nname = \"c\"\nzones = [\"mars\"]\n";
  WritePolicy(broken);
  auto parsed = LoadPolicyFile(path_, ::geteuid());
  auto cached = Load();
  ASSERT_FALSE(parsed.ok());
  ASSERT_FALSE(cached.ok());
  EXPECT_EQ(cached.status().code(), parsed.status().code());
  EXPECT_EQ(cached.status().message(), parsed.status().message());
  EXPECT_NE(cached.status().message().find("policy.toml:"), std::string::npos);
  EXPECT_FALSE(fs::exists(CacheOf()));
  // The file's own checks come first, as in LoadPolicyFile.
  WritePolicy(kFullPolicy);
  ::chmod(path_.c_str(), 0666);
  auto unsafe = Load();
  ASSERT_FALSE(unsafe.ok());
  EXPECT_EQ(unsafe.status().message(), LoadPolicyFile(path_, ::geteuid()).status().message());
  EXPECT_FALSE(fs::exists(CacheOf()));
}

TEST_F(PolicyCacheFileTest, AChangedPolicyIsParsedAndItsCacheReplaced) {
  ExpectCacheUsed();
  const ino_t before = Inode(CacheOf());
  const std::string changed = std::string(kFullPolicy) + "# one more line\n";
  WritePolicy(changed);  // the same inode: the same cache file
  ExpectCacheUsed();     // a routine change: no note
  auto c = ReadPolicyCache(dir_, Identity(), path_, ::geteuid());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->policy.sha256(), Sha256::Hex(changed));
  EXPECT_NE(Inode(CacheOf()), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// What makes a step's load cheap: a cache compiled at least 2 s after the
// file's last change is trusted by the file's identity, without reading the
// text. Shown with a cache of another text: it is what the load serves.
TEST_F(PolicyCacheFileTest, ASettledCacheIsTrustedByTheFileAndAnyChangeEndsIt) {
  ASSERT_TRUE(fs::create_directories(dir_));
  ::chmod(dir_.c_str(), 0755);
  ASSERT_TRUE(WriteFileAtomic(CacheOf(), CacheFor(testing::kPolicy, 3), 0644).ok());
  std::string note;
  auto p = Load(&note);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(note, "");
  EXPECT_EQ(p->sha256(), Sha256::Hex(testing::kPolicy));
  // Any change to the file, even of its mode, changes its ctime (which no
  // one can set back): the cache no longer serves it.
  ASSERT_EQ(::chmod(path_.c_str(), 0640), 0);
  p = Load();
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->sha256(), Sha256::Hex(kFullPolicy));
}

// A cache written within 2 s of the file's change is checked against the
// text at each load (above, "another text's"); once 2 s have passed, a load
// as the owner records it as read then, so later loads skip the hash.
TEST_F(PolicyCacheFileTest, ARacyCacheIsRecordedAgainOnceSettled) {
  ExpectCacheUsed();  // written at once after the policy
  auto c = ReadPolicyCache(dir_, Identity(), path_, ::geteuid());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->Settled());
  std::this_thread::sleep_for(std::chrono::milliseconds(kRacySeconds * 1000 + 100));
  ExpectCacheUsed();
  c = ReadPolicyCache(dir_, Identity(), path_, ::geteuid());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->Settled());
  ExpectSamePolicy(*LoadPolicyFile(path_, ::geteuid()), c->policy);
}

TEST_F(PolicyCacheFileTest, WritingSweepsOtherCachesOlderThanADay) {
  ExpectCacheUsed();
  const std::string stale = dir_ + "/policy-1-2.cache";           // another file's
  const std::string tmp = dir_ + "/policy-x.cache.tmp.0badf00d";  // a crashed writer's
  const std::string other = (fs::path(dir_) / "job-1@n1.json").string();
  for (const std::string& f : {stale, tmp, other}) {
    ASSERT_TRUE(WriteFileAtomic(f, "x", 0600).ok());
    struct timespec old[2] = {{::time(nullptr) - 2 * 24 * 3600, 0},
                              {::time(nullptr) - 2 * 24 * 3600, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), old, 0), 0);
  }
  WritePolicy(testing::kPolicy + std::string("\n"));
  ExpectCacheUsed();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(fs::exists(other));  // not the policy cache's
  EXPECT_TRUE(fs::exists(CacheOf()));
}

TEST_F(PolicyCacheFileTest, WithoutADirectoryEveryLoadParses) {
  std::string note = "x";
  auto p = LoadPolicyCached(path_, "", ::geteuid(), &note);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(note, "");
  ExpectSamePolicy(*LoadPolicyFile(path_, ::geteuid()), *p);
  EXPECT_FALSE(fs::exists(dir_));
}

}  // namespace
}  // namespace hpcml::guard
