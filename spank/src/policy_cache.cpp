// The compiled policy cache (policy_cache.hpp) and LoadPolicyCached.
//
// Layout, native byte order (a cache is read on the machine that wrote it;
// another byte order fails the version check): a 176-byte Header; the rest
// of the policy, PolicyCodec's fields in order (u32 and u8 numbers, strings
// as a u32 length and the bytes, lists as a u32 count and the items); zero
// bytes to a multiple of 8; the DatasetTable block.
#include "policy_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

constexpr char kMagic[8] = {'h', 'p', 'c', 'm', 'l', 'p', 'o', 'l'};
// A compiled policy is smaller than its text, which is at most 64 MiB
// (ReadPolicyText).
constexpr off_t kMaxCacheSize = 128 << 20;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t zero;  // padding, written as 0
  char sha256[64];     // lower-case hex, of the policy text
  std::uint64_t dev, ino, size;
  std::int64_t mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
  std::int64_t read_sec, read_nsec;
  std::uint64_t rest_size;   // the payload after the header
  std::uint64_t table_size;  // the dataset table after it, 8-aligned
  std::uint64_t checksum;    // Checksum(header with this field 0, then the rest)
};
static_assert(sizeof(Header) == 176);

std::size_t TableOffset(std::uint64_t rest_size) {
  return (sizeof(Header) + rest_size + 7) / 8 * 8;
}

// Finds a damaged header or payload, not a forged one (only root writes the
// directory): FNV-1a over 8-byte words, in four lanes so that the
// multiplications overlap, with a shift mixing the high bits down. Any one
// changed word changes the result (each step is a bijection of the word).
// 0.2 ms per MiB here, SHA-256 0.65.
std::uint64_t Mix(std::uint64_t h, std::uint64_t word) {
  h = (h ^ word) * 0x100000001b3;
  return h ^ (h >> 29);
}

std::uint64_t Checksum(std::string_view data) {
  std::uint64_t lane[4] = {0xcbf29ce484222325, 1, 2, 3};
  std::size_t i = 0;
  for (; i + sizeof lane <= data.size(); i += sizeof lane) {
    std::uint64_t words[4];
    std::memcpy(words, data.data() + i, sizeof words);
    for (int l = 0; l < 4; ++l) lane[l] = Mix(lane[l], words[l]);
  }
  for (; i < data.size(); ++i) lane[0] = Mix(lane[0], static_cast<unsigned char>(data[i]));
  return Mix(Mix(Mix(lane[0], lane[1]), lane[2]), lane[3]);
}

class Writer {
 public:
  void U8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(std::uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Count(std::size_t n) { U32(static_cast<std::uint32_t>(n)); }
  void Str(std::string_view s) {
    Count(s.size());
    out_.append(s);
  }
  template <typename Strings>
  void Strs(const Strings& list) {
    Count(list.size());
    for (const std::string& s : list) Str(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote. Reading past the end marks the reader failed
// and yields zeros and empty strings, so a decoder reads on and checks ok()
// once at the end; counts are bounded by the bytes left, so a damaged count
// never makes a huge loop or allocation.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::uint8_t U8() {
    std::uint8_t v = 0;
    Take(&v, sizeof v);
    return v;
  }
  std::uint32_t U32() {
    std::uint32_t v = 0;
    Take(&v, sizeof v);
    return v;
  }
  int Line() { return static_cast<int>(U32() & 0x7fffffff); }
  // A count of items taking at least `min_item` bytes each.
  std::uint32_t Count(std::size_t min_item) {
    std::uint32_t n = U32();
    if (n <= (data_.size() - pos_) / min_item) return n;
    Fail();
    return 0;
  }
  std::string_view Str() {
    std::uint32_t n = U32();
    if (n > data_.size() - pos_) {
      Fail();
      return {};
    }
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  template <typename Strings>
  void Strs(Strings* out) {
    for (std::uint32_t n = Count(4); n > 0; --n) out->insert(out->end(), std::string(Str()));
  }
  void Fail() { ok_ = false; }
  // Everything read, nothing left over.
  bool ok() const { return ok_ && pos_ == data_.size(); }

 private:
  void Take(void* out, std::size_t n) {
    if (n > data_.size() - pos_) {
      Fail();
      return;
    }
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
  }
  std::string_view data_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

std::string FileName(const PolicyFileIdentity& file) {
  return fmt::format("policy-{:x}-{:x}.cache", file.dev, file.ino);
}

// `fd`, named `what` in errors, is a file of `type` (S_IFREG, S_IFDIR) owned
// by root or `owner` and writable by nobody else.
Result<struct stat> CheckTrusted(int fd, const std::string& what, mode_t type, unsigned owner) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoError("fstat " + what, errno);
  if ((st.st_mode & S_IFMT) != type)
    return PermissionDenied("{}: not a {}", what, type == S_IFDIR ? "directory" : "regular file");
  if (st.st_uid != 0 && st.st_uid != owner)
    return PermissionDenied("{}: owned by uid {}, must be owned by root", what, st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return PermissionDenied("{}: writable by group or others (mode {:o})", what,
                            st.st_mode & 07777);
  return st;
}

Result<UniqueFd> OpenTrustedDirectory(const std::string& dir, unsigned owner) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  HPCML_RETURN_IF_ERROR(CheckTrusted(fd.get(), dir, S_IFDIR, owner).status());
  return fd;
}

// Removes other policies' caches (and temporary files a crash left) last
// written more than a day ago.
void SweepStaleCaches(const std::string& dir, const std::string& keep) {
  UniqueDir d(::opendir(dir.c_str()));
  if (!d) return;
  const std::time_t oldest = std::time(nullptr) - 24 * 3600;
  while (const dirent* e = ::readdir(d.get())) {
    std::string_view name(e->d_name);
    if (!name.starts_with("policy-") || name == keep) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_mtime < oldest)
      ::unlinkat(::dirfd(d.get()), e->d_name, 0);
  }
}

}  // namespace

// The payload: every member ParsePolicy sets but the source, the digest (the
// header's) and the dataset table (its own block), and the lookups rebuilt
// from the bindings (Policy::BuildLookups).
class PolicyCodec {
 public:
  static std::string Payload(const Policy& p) {
    Writer w;
    w.Count(p.zones_.size());
    for (const auto& [name, description] : p.zones_) {
      w.Str(name);
      w.Str(description);
    }
    w.Count(p.zone_nodes_.size());
    for (const auto& [zone, patterns] : p.zone_nodes_) {
      w.Str(zone);
      w.Strs(patterns);
    }
    w.Count(p.roles_.size());
    for (const auto& [name, role] : p.roles_) {
      w.Str(name);
      w.Strs(role.zones);
      w.Strs(role.classifications);
      w.U32(role.max_gpus);
      w.U8(role.partitions.has_value());
      if (role.partitions) w.Strs(*role.partitions);
      w.U32(static_cast<std::uint32_t>(role.line));
    }
    w.Count(p.bindings_.size());
    for (const Binding& b : p.bindings_) {
      w.U8(static_cast<std::uint8_t>(b.kind));
      w.Str(b.name);
      w.Strs(b.roles);
      w.U32(static_cast<std::uint32_t>(b.line));
    }
    w.U8(p.default_role_.has_value());
    if (p.default_role_) w.Str(*p.default_role_);
    w.U8(static_cast<std::uint8_t>(p.unknown_datasets_));
    w.Strs(p.view_roots_);
    return std::move(w.out());
  }

  static std::string_view Table(const Policy& p) { return p.datasets_.bytes(); }

  // The smallest encoded item sizes bound the counts (Reader::Count).
  static Result<Policy> FromPayload(std::string_view payload, DatasetTable table,
                                    std::string_view sha256, std::string_view source) {
    Reader r(payload);
    Policy p;
    p.source_ = std::string(source);
    p.sha256_ = std::string(sha256);
    for (std::uint32_t n = r.Count(8); n > 0; --n) {
      std::string name(r.Str());
      p.zones_.emplace_hint(p.zones_.end(), std::move(name), r.Str());
    }
    for (std::uint32_t n = r.Count(8); n > 0; --n) {
      auto it =
          p.zone_nodes_.emplace_hint(p.zone_nodes_.end(), r.Str(), std::vector<std::string>());
      r.Strs(&it->second);
    }
    for (std::uint32_t n = r.Count(21); n > 0; --n) {
      Role role;
      role.name = r.Str();
      r.Strs(&role.zones);
      r.Strs(&role.classifications);
      role.max_gpus = r.U32();
      if (r.U8() != 0) r.Strs(&role.partitions.emplace());
      role.line = r.Line();
      std::string name = role.name;
      p.roles_.emplace_hint(p.roles_.end(), std::move(name), std::move(role));
    }
    p.bindings_.resize(r.Count(13));
    for (Binding& b : p.bindings_) {
      std::uint8_t kind = r.U8();
      if (kind > static_cast<std::uint8_t>(BindingKind::kAccount)) r.Fail();
      b.kind = static_cast<BindingKind>(kind);
      b.name = r.Str();
      r.Strs(&b.roles);
      b.line = r.Line();
    }
    if (r.U8() != 0) p.default_role_ = r.Str();
    std::uint8_t unknown = r.U8();
    if (unknown > static_cast<std::uint8_t>(UnknownDatasets::kAllow)) r.Fail();
    p.unknown_datasets_ = static_cast<UnknownDatasets>(unknown);
    r.Strs(&p.view_roots_);
    if (!r.ok()) return Corrupt("malformed payload");
    p.datasets_ = std::move(table);
    p.BuildLookups();
    return p;
  }
};

PolicyFileIdentity PolicyFileIdentity::Of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev),
          static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size),
          st.st_mtim.tv_sec,
          st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec,
          st.st_ctim.tv_nsec};
}

bool CompiledPolicy::Settled() const {
  // In nanoseconds: read_at - ctime >= kRacySeconds.
  const std::int64_t sec = read_at.tv_sec - identity.ctime_sec;
  const std::int64_t nsec = read_at.tv_nsec - identity.ctime_nsec;
  return sec > kRacySeconds || (sec == kRacySeconds && nsec >= 0);
}

std::string PolicyCachePath(const std::string& dir, const PolicyFileIdentity& file) {
  return dir + "/" + FileName(file);
}

std::string EncodePolicyCache(const Policy& policy, const PolicyFileIdentity& file,
                              struct timespec read_at) {
  const std::string rest = PolicyCodec::Payload(policy);
  const std::string_view table = PolicyCodec::Table(policy);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = kPolicyCacheVersion;
  policy.sha256().copy(h.sha256, sizeof h.sha256);
  h.dev = file.dev;
  h.ino = file.ino;
  h.size = file.size;
  h.mtime_sec = file.mtime_sec;
  h.mtime_nsec = file.mtime_nsec;
  h.ctime_sec = file.ctime_sec;
  h.ctime_nsec = file.ctime_nsec;
  h.read_sec = read_at.tv_sec;
  h.read_nsec = read_at.tv_nsec;
  h.rest_size = rest.size();
  h.table_size = table.size();
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += rest;
  out.resize(TableOffset(rest.size()), '\0');
  h.checksum = Checksum(out);
  std::memcpy(out.data() + offsetof(Header, checksum), &h.checksum, sizeof h.checksum);
  out += table;
  return out;
}

Result<CompiledPolicy> DecodePolicyCache(std::string_view bytes, std::shared_ptr<const void> keep,
                                         std::string_view source) {
  Header h{};
  if (bytes.size() < sizeof h) return Corrupt("shorter than its header");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof h.magic) != 0) return Corrupt("not a policy cache");
  if (h.version != kPolicyCacheVersion)
    return Corrupt("format version {}, expected {}", h.version, kPolicyCacheVersion);
  if (h.rest_size > bytes.size() || h.table_size > bytes.size() ||
      TableOffset(h.rest_size) + h.table_size != bytes.size())
    return Corrupt("{} bytes, its header says {} of payload", bytes.size(),
                   TableOffset(h.rest_size) + h.table_size);
  std::string checked(bytes.substr(0, TableOffset(h.rest_size)));
  std::memset(checked.data() + offsetof(Header, checksum), 0, sizeof h.checksum);
  if (Checksum(checked) != h.checksum) return Corrupt("checksum mismatch");
  const std::string_view sha256(h.sha256, sizeof h.sha256);
  if (!std::all_of(sha256.begin(), sha256.end(),
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return Corrupt("not a SHA-256 digest");
  HPCML_ASSIGN_OR_RETURN(
      DatasetTable table,
      DatasetTable::Open(bytes.substr(TableOffset(h.rest_size)), std::move(keep)));
  HPCML_ASSIGN_OR_RETURN(
      Policy policy, PolicyCodec::FromPayload(bytes.substr(sizeof h, h.rest_size), std::move(table),
                                              sha256, source));
  CompiledPolicy out{std::move(policy),
                     {h.dev, h.ino, h.size, h.mtime_sec, h.mtime_nsec, h.ctime_sec, h.ctime_nsec},
                     {}};
  out.read_at.tv_sec = h.read_sec;
  out.read_at.tv_nsec = h.read_nsec;
  return out;
}

Result<CompiledPolicy> ReadPolicyCache(const std::string& dir, const PolicyFileIdentity& file,
                                       std::string_view source, unsigned required_owner) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd d, OpenTrustedDirectory(dir, required_owner));
  const std::string name = FileName(file), path = dir + "/" + name;
  UniqueFd fd(::openat(d.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(path, errno);
  HPCML_ASSIGN_OR_RETURN(struct stat st, CheckTrusted(fd.get(), path, S_IFREG, required_owner));
  if (st.st_size > kMaxCacheSize) return Corrupt("{}: larger than {} bytes", path, kMaxCacheSize);
  if (st.st_size < static_cast<off_t>(sizeof(Header)))
    return Corrupt("{}: shorter than its header", path);
  // Mapped, not read: a load touches only the pages its lookups need. Only
  // root replaces the file, by a rename, so the mapped bytes never change.
  const auto size = static_cast<std::size_t>(st.st_size);
  void* at = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (at == MAP_FAILED) return ErrnoError("mmap " + path, errno);
  std::shared_ptr<const void> mapping(
      at, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  auto compiled =
      DecodePolicyCache(std::string_view(static_cast<const char*>(at), size), mapping, source);
  if (!compiled.ok()) return Corrupt("{}: {}", path, compiled.status().message());
  // The file changed since (a routine edit): no more a problem than no cache.
  if (!(compiled->identity == file))
    return NotFound("{}: compiled from another version of the policy file", path);
  return compiled;
}

Status WritePolicyCache(const std::string& dir, const Policy& policy,
                        const PolicyFileIdentity& file, struct timespec read_at,
                        unsigned required_owner, unsigned mode) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir " + dir, errno);
  HPCML_RETURN_IF_ERROR(OpenTrustedDirectory(dir, required_owner).status());
  const std::string name = FileName(file);
  SweepStaleCaches(dir, name);
  return WriteFileAtomic(dir + "/" + name, EncodePolicyCache(policy, file, read_at), mode & 0644);
}

Result<Policy> LoadPolicyCached(const std::string& path, const std::string& cache_dir,
                                unsigned required_owner, std::string* cache_note) {
  if (cache_note) cache_note->clear();
  // Before the file is opened and its identity taken: a later write to it
  // gives it a ctime after this time (CompiledPolicy::Settled).
  struct timespec opened {};
  ::clock_gettime(CLOCK_REALTIME, &opened);
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenPolicyFile(path, required_owner));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("fstat " + path, errno);
  const PolicyFileIdentity file = PolicyFileIdentity::Of(st);
  const bool owner = ::geteuid() == required_owner;
  Status missed;
  if (!cache_dir.empty()) {
    auto cached = ReadPolicyCache(cache_dir, file, path, required_owner);
    if (cached.ok() && cached->Settled()) return std::move(cached->policy);
    if (cached.ok()) {
      // Compiled within a timestamp tick or two of the file's last change:
      // the text decides.
      HPCML_ASSIGN_OR_RETURN(std::string sha256, HashPolicyText(fd.get(), path));
      if (sha256 == cached->policy.sha256()) {
        CompiledPolicy settled{std::move(cached->policy), file, opened};
        // Recorded as read now, once that is late enough: later loads skip
        // the hash.
        if (owner && settled.Settled())
          (void)WritePolicyCache(cache_dir, settled.policy, file, opened, required_owner,
                                 st.st_mode);
        return std::move(settled.policy);
      }
      missed = Corrupt("{}: compiled from another text of the policy file",
                       PolicyCachePath(cache_dir, file));
    } else {
      missed = cached.status();
    }
  }
  // Parsed as LoadPolicyFile does (its errors as it gives them).
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadPolicyText(fd.get(), path));
  HPCML_ASSIGN_OR_RETURN(Policy policy, ParsePolicy(text, path));
  // Only the owner the cache must have writes it (root: slurmd, slurmstepd,
  // root's srun); a user's srun parses until then.
  if (cache_dir.empty() || !owner) return policy;
  Status written = WritePolicyCache(cache_dir, policy, file, opened, required_owner, st.st_mode);
  if (cache_note) {
    if (missed.code() != StatusCode::kNotFound)
      *cache_note = fmt::format("ignored the policy cache: {}{}", missed.message(),
                                written.ok() ? " (written again)" : "; ");
    if (!written.ok())
      *cache_note += fmt::format(
          "cannot write the policy cache: {} (until it can be, each step parses the policy)",
          written.message());
  }
  return policy;
}

}  // namespace hpcml::guard
