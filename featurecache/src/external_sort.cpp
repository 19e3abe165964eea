#include "external_sort.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

namespace hpcml::featurecache {

namespace {

Result<UniqueFd> TempFile(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
  if (fd >= 0) return UniqueFd(fd);
  // Filesystems without O_TMPFILE: create and unlink at once.
  std::string tmpl = dir + "/.hpcml-sort-XXXXXX";
  fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("temporary file in " + dir, errno);
  ::unlink(tmpl.c_str());
  return UniqueFd(fd);
}

Status WriteAll(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write temporary sort run", errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

struct ExternalSorter::Run {
  UniqueFd fd;
  uint64_t records = 0;
  uint64_t read_records = 0;  // read into buf so far
  uint64_t offset = 0;
  std::vector<uint8_t> buf;
  size_t buf_records = 0;
  size_t cursor = 0;  // index in buf of the current record
};

ExternalSorter::ExternalSorter(size_t key_words, size_t payload_bytes, uint64_t memory_bytes,
                               std::string tmpdir)
    : kw_(key_words),
      pb_(payload_bytes),
      rec_(key_words * 8 + payload_bytes),
      budget_(memory_bytes),
      tmpdir_(std::move(tmpdir)) {
  if (tmpdir_.empty()) {
    const char* t = std::getenv("TMPDIR");
    tmpdir_ = t != nullptr && *t != '\0' ? t : "/tmp";
  }
  // Per buffered record: the record, its place in the order, and the two
  // 16-byte arrays RadixOrder uses while it runs.
  const size_t per_record = rec_ + sizeof(uint32_t) + 2 * 16;
  capacity_ = std::max<size_t>(1024, static_cast<size_t>(budget_ / per_record));
  capacity_ = std::min<size_t>(capacity_, size_t{1} << 31);
}

ExternalSorter::~ExternalSorter() = default;

bool ExternalSorter::Less(const uint8_t* a, const uint8_t* b) const {
  for (size_t i = 0; i < kw_; ++i) {
    uint64_t x, y;
    std::memcpy(&x, a + 8 * i, 8);
    std::memcpy(&y, b + 8 * i, 8);
    if (x != y) return x < y;
  }
  return false;
}

Status ExternalSorter::Add(const uint64_t* key, const void* payload) {
  if (finished_) return FailedPrecondition("sorter: Add after Finish");
  if (n_ == capacity_) HPCML_RETURN_IF_ERROR(Spill());
  if (buf_.size() < (n_ + 1) * rec_) {
    // Grow geometrically up to the run capacity (no budget-sized allocation
    // for small inputs).
    size_t want = std::min(capacity_, std::max<size_t>(1024, 2 * n_));
    buf_.resize(want * rec_);
  }
  uint8_t* dst = buf_.data() + n_ * rec_;
  std::memcpy(dst, key, kw_ * 8);

  if (pb_ > 0) std::memcpy(dst + kw_ * 8, payload, pb_);
  ++n_;
  ++count_;
  return Status::Ok();
}

// RadixOrder on the buffered keys; keys too wide for it are sorted by
// comparison through the order array.
Status ExternalSorter::SortBuffer() {
  const uint8_t* base = buf_.data();
  auto key = [&](size_t i, uint64_t* words) { std::memcpy(words, base + i * rec_, kw_ * 8); };
  if (RadixOrder(n_, kw_, key, &order_)) return Status::Ok();
  order_.resize(n_);
  for (size_t i = 0; i < n_; ++i) order_[i] = static_cast<uint32_t>(i);
  std::sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
    return Less(base + size_t{a} * rec_, base + size_t{b} * rec_);
  });
  return Status::Ok();
}

Status ExternalSorter::Spill() {
  HPCML_RETURN_IF_ERROR(SortBuffer());
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, TempFile(tmpdir_));
  // The records in order, gathered into 4 MiB chunks.
  const size_t chunk = std::max<size_t>(1, (4u << 20) / rec_);
  std::vector<uint8_t> out(std::min(chunk, n_) * rec_);
  for (size_t i = 0; i < n_; i += chunk) {
    const size_t m = std::min(chunk, n_ - i);
    for (size_t j = 0; j < m; ++j) {
      std::memcpy(out.data() + j * rec_, buf_.data() + size_t{order_[i + j]} * rec_, rec_);
    }
    HPCML_RETURN_IF_ERROR(WriteAll(fd.get(), out.data(), m * rec_));
  }
  auto run = std::make_unique<Run>();
  run->fd = std::move(fd);
  run->records = n_;
  runs_.push_back(std::move(run));
  n_ = 0;
  return Status::Ok();
}

Status ExternalSorter::Finish() {
  if (finished_) return Status::Ok();
  finished_ = true;
  current_.resize((rec_ + 7) / 8);
  if (runs_.empty()) return SortBuffer();  // everything fits: no I/O at all
  if (n_ > 0) HPCML_RETURN_IF_ERROR(Spill());
  buf_.clear();
  buf_.shrink_to_fit();
  order_.clear();
  order_.shrink_to_fit();
  // Merge buffers share the budget.
  size_t per_run = std::max<size_t>(rec_ * 64, static_cast<size_t>(budget_ / runs_.size()) / 2);
  per_run = std::min<size_t>(per_run, 8u << 20);
  per_run = per_run / rec_ * rec_;
  for (auto& r : runs_) r->buf.resize(per_run);
  return Status::Ok();
}

// Moves a run's cursor to its next record, refilling its buffer from the
// file past the end; false when the run is drained.
Result<bool> ExternalSorter::Advance(Run& r) const {
  if (r.cursor + 1 < r.buf_records) {
    ++r.cursor;
    return true;
  }
  if (r.read_records >= r.records) return false;
  size_t want =
      static_cast<size_t>(std::min<uint64_t>(r.buf.size() / rec_, r.records - r.read_records)) *
      rec_;
  size_t got = 0;
  while (got < want) {
    ssize_t n =
        ::pread(r.fd.get(), r.buf.data() + got, want - got, static_cast<off_t>(r.offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read temporary sort run", errno);
    }
    if (n == 0) return IoError("temporary sort run is shorter than written");
    got += static_cast<size_t>(n);
  }
  r.offset += want;
  r.buf_records = want / rec_;
  r.read_records += r.buf_records;
  r.cursor = 0;
  return true;
}

// Copies `rec` to current_ (word-aligned) and points the caller at it.
void ExternalSorter::Emit(const uint8_t* rec, const uint64_t** key, const uint8_t** payload) {
  std::memcpy(current_.data(), rec, rec_);
  *key = current_.data();
  *payload = reinterpret_cast<const uint8_t*>(current_.data()) + kw_ * 8;
}

Result<bool> ExternalSorter::Next(const uint64_t** key, const uint8_t** payload) {
  if (!finished_) HPCML_RETURN_IF_ERROR(Finish());
  if (runs_.empty()) {
    if (pos_ >= n_) return false;
    Emit(buf_.data() + size_t{order_[pos_++]} * rec_, key, payload);
    return true;
  }
  auto rec_of = [&](size_t i) { return runs_[i]->buf.data() + runs_[i]->cursor * rec_; };
  auto greater = [&](size_t a, size_t b) { return Less(rec_of(b), rec_of(a)); };
  if (!heap_started_) {
    heap_started_ = true;
    for (size_t i = 0; i < runs_.size(); ++i) {
      runs_[i]->cursor = 0;
      runs_[i]->buf_records = 0;
      HPCML_ASSIGN_OR_RETURN(bool has, Advance(*runs_[i]));
      if (has) heap_.push_back(i);
    }
    std::make_heap(heap_.begin(), heap_.end(), greater);
  } else if (!heap_.empty()) {
    // Move past the record returned last time.
    std::pop_heap(heap_.begin(), heap_.end(), greater);
    size_t i = heap_.back();
    HPCML_ASSIGN_OR_RETURN(bool has, Advance(*runs_[i]));
    if (has) {
      std::push_heap(heap_.begin(), heap_.end(), greater);
    } else {
      heap_.pop_back();
    }
  }
  if (heap_.empty()) return false;
  Emit(rec_of(heap_.front()), key, payload);
  return true;
}

}  // namespace hpcml::featurecache
