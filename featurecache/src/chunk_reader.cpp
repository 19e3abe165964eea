#include "chunk_reader.hpp"

#include <blosc.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hpcml::featurecache {

namespace {

// The file's user block size (0 when none or unknown): chunk addresses are
// relative to its end.
hsize_t Userblock(hid_t file) {
  hsize_t userblock = 0;
  hid_t fcpl = H5Fget_create_plist(file);
  if (fcpl >= 0) {
    H5Pget_userblock(fcpl, &userblock);
    H5Pclose(fcpl);
  }
  return userblock;
}

}  // namespace

Result<ChunkReader> ChunkReader::Open(const VersionReader& version, hid_t dset, uint64_t width,
                                      const char* name, bool allow_direct) {
  h5::SilenceErrorPrinting();
  ChunkReader r;
  r.version_ = &version;
  r.dset_ = dset;
  r.what_ = fmt::format("{}: version {}: dataset {}", version.path(), version.info().name, name);
  r.rows_ = version.rows();
  r.width_ = width;
  r.row_bytes_ = width * sizeof(float);
  HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::DatasetDims(dset, r.what_));
  r.rank_ = static_cast<int>(dims.size());
  if (dims.empty() || dims[0] != r.rows_ || (dims.size() == 2 && dims[1] != width) ||
      dims.size() > 2) {
    return Corrupt("{}: unexpected shape", r.what_);
  }
  HPCML_ASSIGN_OR_RETURN(h5::PropList dcpl, h5::Own<h5::PropList>(H5Dget_create_plist(dset),
                                                                  StatusCode::kCorrupt, r.what_));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) {
    r.chunk_rows_ = version.info().chunk_rows;
    return r;  // contiguous or compact (not written by us): HDF5 mode
  }
  hsize_t chunk[2] = {0, 0};
  int rank = H5Pget_chunk(dcpl.get(), 2, chunk);
  if (rank < 1 || chunk[0] == 0 || (rank == 2 && chunk[1] != width)) {
    return Corrupt("{}: unexpected chunk shape", r.what_);
  }
  r.chunk_rows_ = chunk[0];
  if (!allow_direct) return r;
  int nfilters = H5Pget_nfilters(dcpl.get());
  if (nfilters < 0) return h5::Error(StatusCode::kCorrupt, r.what_);
  if (!r.ReadFilters(dcpl.get())) return r;
  HPCML_ASSIGN_OR_RETURN(bool have_fd, r.DupFileDescriptor(version));
  if (!have_fd) return r;
  HPCML_ASSIGN_OR_RETURN(bool located, r.LocateChunks(version.file_id()));
  if (!located) return r;
  HPCML_RETURN_IF_ERROR(r.CheckDirectReads());
  return r;
}

// Records where shuffle and deflate, or Blosc, sit in the pipeline; false
// for any other filter or combination (HDF5 decodes).
bool ChunkReader::ReadFilters(hid_t dcpl) {
  const int nfilters = H5Pget_nfilters(dcpl);
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, cd[8];
    size_t ncd = 8;
    char fname[64];
    unsigned config = 0;
    H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &ncd, cd, sizeof fname,
                                     fname, &config);
    if (id == H5Z_FILTER_SHUFFLE && deflate_index_ < 0) {
      shuffle_index_ = i;
    } else if (id == H5Z_FILTER_DEFLATE) {
      deflate_index_ = i;
    } else if (id == kBloscFilterId && nfilters == 1) {
      blosc_index_ = i;  // Blosc unshuffles its own blocks
    } else {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
  }
  filtered_ = nfilters > 0;
  shuffle_ = shuffle_index_ >= 0;
  return true;
}

// The descriptor HDF5 opened (sec2 driver only): same inode for sure.
Result<bool> ChunkReader::DupFileDescriptor(const VersionReader& version) {
  HPCML_ASSIGN_OR_RETURN(
      h5::PropList fapl,
      h5::Own<h5::PropList>(H5Fget_access_plist(version.file_id()), StatusCode::kInternal, what_));
  if (H5Pget_driver(fapl.get()) != H5FD_SEC2) return false;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(version.file_id(), H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  int fd = ::dup(*static_cast<int*>(handle));
  if (fd < 0) return ErrnoError("dup " + version.path(), errno);
  fd_ = UniqueFd(fd);
  return true;
}

// Every chunk's file address, size and filter mask; false (and no
// descriptor) when a chunk is unallocated (fill values).
Result<bool> ChunkReader::LocateChunks(hid_t file) {
  const hsize_t userblock = Userblock(file);
  const uint64_t nchunks = (rows_ + chunk_rows_ - 1) / chunk_rows_;
  locs_.resize(nchunks);
  for (uint64_t c = 0; c < nchunks; ++c) {
    hsize_t coord[2] = {c * chunk_rows_, 0};
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dset_, coord, &mask, &addr, &size) < 0) {
      return h5::Error(StatusCode::kCorrupt, fmt::format("{}: chunk {} index", what_, c));
    }
    if (addr == HADDR_UNDEF || size == 0) {
      locs_.clear();
      fd_.reset();
      return false;
    }
    locs_[c] = {addr + userblock, size, mask};
  }
  direct_ = true;
  return true;
}

// Trust, but verify: the first row read both ways must agree.
Status ChunkReader::CheckDirectReads() {
  std::vector<float> a(width_), b(width_);
  ChunkScratch scratch;
  HPCML_RETURN_IF_ERROR(ReadHdf5(0, 1, a.data()));
  HPCML_RETURN_IF_ERROR(Read(0, 1, b.data(), &scratch));
  if (std::memcmp(a.data(), b.data(), width_ * sizeof(float)) != 0) {
    return Internal("{}: direct chunk reads disagree with HDF5 on row 0", what_);
  }
  return Status::Ok();
}

uint64_t ChunkReader::FileOffset(uint64_t row) const {
  if (!direct_ || filtered_ || row >= rows_) return 0;
  const uint64_t c = row / chunk_rows_;
  return locs_[c].addr + (row - c * chunk_rows_) * row_bytes_;
}

Status ChunkReader::PreadAll(void* dst, uint64_t size, uint64_t offset) const {
  auto* p = static_cast<uint8_t*>(dst);
  while (size > 0) {
    ssize_t n = ::pread(fd_.get(), p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what_, errno);
    }
    if (n == 0) return Corrupt("{}: file ends inside a chunk (truncated?)", what_);
    p += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status ChunkReader::Decode(uint64_t c, ChunkScratch* s) const {
  if (s->owner == this && s->chunk == static_cast<int64_t>(c)) return Status::Ok();
  s->decoded.resize(chunk_rows_ * row_bytes_);
  s->owner = nullptr;
  HPCML_RETURN_IF_ERROR(DecodeInto(c, s->decoded.data(), s));
  s->owner = this;
  s->chunk = static_cast<int64_t>(c);
  return Status::Ok();
}

Status ChunkReader::DecodeInto(uint64_t c, uint8_t* dst, ChunkScratch* s) const {
  const Loc& loc = locs_[c];
  const uint64_t full = chunk_rows_ * row_bytes_;  // HDF5 stores edge chunks whole
  s->raw.resize(loc.size);
  HPCML_RETURN_IF_ERROR(PreadAll(s->raw.data(), loc.size, loc.addr));
  const uint8_t* cur = s->raw.data();
  uint64_t cur_size = loc.size;
  const bool do_blosc = blosc_index_ >= 0 && (loc.mask & (1u << blosc_index_)) == 0;
  if (do_blosc) {
    size_t nbytes = 0, cbytes = 0, blocksize = 0;
    if (cur_size >= BLOSC_MIN_HEADER_LENGTH) blosc_cbuffer_sizes(cur, &nbytes, &cbytes, &blocksize);
    // One thread per call: the loader's workers decode in parallel already.
    if (nbytes != full || cbytes > cur_size ||
        blosc_decompress_ctx(cur, dst, full, 1) != static_cast<int>(full)) {
      return Corrupt("{}: chunk {} is not a Blosc buffer of {} bytes", what_, c, full);
    }
    return Status::Ok();
  }
  const bool do_deflate = deflate_index_ >= 0 && (loc.mask & (1u << deflate_index_)) == 0;
  const bool do_shuffle = shuffle_index_ >= 0 && (loc.mask & (1u << shuffle_index_)) == 0;
  if (do_deflate) {
    s->inflated.resize(full);
    uLongf out_len = static_cast<uLongf>(full);
    int rc = ::uncompress(s->inflated.data(), &out_len, cur, static_cast<uLong>(cur_size));
    if (rc != Z_OK || out_len != full) {
      return Corrupt("{}: chunk {} does not inflate to {} bytes (zlib error {})", what_, c, full,
                     rc);
    }
    cur = s->inflated.data();
    cur_size = full;
  }
  if (cur_size != full)
    return Corrupt("{}: chunk {} holds {} bytes, expected {}", what_, c, cur_size, full);
  if (do_shuffle) {
    // Byte shuffle of 4-byte elements: byte b of element i is at b * n + i.
    const uint64_t n = full / 4;
    for (uint64_t i = 0; i < n; ++i) {
      dst[4 * i + 0] = cur[i];
      dst[4 * i + 1] = cur[n + i];
      dst[4 * i + 2] = cur[2 * n + i];
      dst[4 * i + 3] = cur[3 * n + i];
    }
  } else {
    std::memcpy(dst, cur, full);
  }
  return Status::Ok();
}

Status ChunkReader::ReadHdf5(uint64_t row, uint64_t count, float* dst) const {
  h5::SilenceErrorPrinting();
  hsize_t start[2] = {row, 0};
  hsize_t cnt[2] = {count, width_};
  const int rank = rank_;
  HPCML_ASSIGN_OR_RETURN(h5::Dataspace fspace,
                         h5::Own<h5::Dataspace>(H5Dget_space(dset_), StatusCode::kCorrupt, what_));
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr) < 0) {
    return h5::Error(StatusCode::kInvalidArgument, what_);
  }
  HPCML_ASSIGN_OR_RETURN(h5::Dataspace mspace,
                         h5::Own<h5::Dataspace>(H5Screate_simple(rank, cnt, nullptr),
                                                StatusCode::kInternal, "dataspace"));
  if (H5Dread(dset_, H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, dst) < 0) {
    return h5::Error(StatusCode::kCorrupt,
                     fmt::format("{}: read rows {}..{}", what_, row, row + count));
  }
  return Status::Ok();
}

Status ChunkReader::Read(uint64_t row, uint64_t count, float* dst, ChunkScratch* scratch) const {
  if (row > rows_ || count > rows_ - row)
    return InvalidArgument("{}: rows {}..{} out of range", what_, row, row + count);
  if (count == 0) return Status::Ok();
  if (!direct_) return ReadHdf5(row, count, dst);
  auto* out = reinterpret_cast<uint8_t*>(dst);
  while (count > 0) {
    const uint64_t c = row / chunk_rows_;
    const uint64_t in_chunk = row - c * chunk_rows_;
    uint64_t take = std::min(count, chunk_rows_ - in_chunk);
    if (!filtered_) {
      // Whole runs of chunks that lie back to back in the file: one pread.
      uint64_t bytes = take * row_bytes_;
      uint64_t next = c + 1;
      uint64_t more = count - take;
      while (more > 0 && next < locs_.size() &&
             locs_[next].addr == locs_[next - 1].addr + chunk_rows_ * row_bytes_) {
        uint64_t t = std::min(more, chunk_rows_);
        bytes += t * row_bytes_;
        take += t;
        more -= t;
        ++next;
      }
      HPCML_RETURN_IF_ERROR(PreadAll(out, bytes, locs_[c].addr + in_chunk * row_bytes_));
    } else if (in_chunk == 0 && take == chunk_rows_) {
      HPCML_RETURN_IF_ERROR(DecodeInto(c, out, scratch));  // a whole chunk: no staging copy
    } else {
      HPCML_RETURN_IF_ERROR(Decode(c, scratch));
      std::memcpy(out, scratch->decoded.data() + in_chunk * row_bytes_, take * row_bytes_);
    }
    out += take * row_bytes_;
    row += take;
    count -= take;
  }
  return Status::Ok();
}

}  // namespace hpcml::featurecache
