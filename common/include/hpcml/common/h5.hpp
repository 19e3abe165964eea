// The project's one layer over the HDF5 1.10 C API, in the HighFive manner:
// RAII owners for identifiers, one error mapper (HDF5's error stack into a
// Status naming the object), checked wrappers for the calls everyone makes,
// and typed attribute helpers. Part of target hpcml::h5 (common/ links HDF5
// only here).
//
// Contract: an Owner (hpcml::Owner, owner.hpp) owns exactly one open
// identifier of its kind and closes it with the matching H5*close on
// destruction; move-only; never throws.
// Debian's HDF5 1.10 is built thread-safe (H5is_library_threadsafe is true:
// one global lock), so several threads may call HDF5, one at a time; a
// handle itself is not shared. HDF5's error stack and its automatic printing
// are per thread in that build: call SilenceErrorPrinting() in every thread
// before its first HDF5 call; failures are reported as Status.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpcml/common/owner.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::h5 {

// An identifier closed with its kind's H5*close (hpcml::Owner).
template <herr_t (*CloseFn)(hid_t)>
using Owner = hpcml::Owner<CloseWith<hid_t, CloseFn, H5I_INVALID_HID>>;

using File = Owner<H5Fclose>;
using Group = Owner<H5Gclose>;
using Dataset = Owner<H5Dclose>;
using Dataspace = Owner<H5Sclose>;
using Datatype = Owner<H5Tclose>;
using Attribute = Owner<H5Aclose>;
using PropList = Owner<H5Pclose>;

// Turns off HDF5's printing of its error stack to stderr for the calling
// thread. Idempotent; cheap after the first call on a thread.
void SilenceErrorPrinting();

// The error mapper: a Status built from the calling thread's HDF5 error
// stack, which it clears: "<context>: <outermost> (<innermost>)", e.g.
// "x.h5: unable to open file (unable to open file: name = ...)".
Status Error(StatusCode code, std::string_view context);

// An identifier from an HDF5 call: wrapped in its owner, or Error(code,
// context) when negative.
template <typename H>
Result<H> Own(hid_t id, StatusCode code, std::string_view context) {
  if (id < 0) return Error(code, context);
  return H(id);
}

// Checks an identifier returned by an H5 call: `id` on success, otherwise
// Error(kIoError, what).
Result<hid_t> Check(hid_t id, std::string_view what);
// Checks an herr_t result the same way.
Status CheckErr(herr_t err, std::string_view what);

// Closes `h` and reports HDF5's verdict (for a file: whether its metadata
// reached the operating system); use where a failed close means lost data.
template <herr_t (*CloseFn)(hid_t)>
Status Close(Owner<CloseFn>& h, std::string_view what) {
  if (!h.valid()) return Status::Ok();
  hid_t id = h.release();
  if (CloseFn(id) < 0) return Error(StatusCode::kIoError, what);
  return Status::Ok();
}

// How WriteAttr stores a string: variable-length UTF-8 (what h5py writes for
// str), or fixed-length of exactly the string's bytes (at least one), the
// layout of checkpoint shards.
enum class StringStorage { kVariableUtf8, kFixed };

// Attributes (scalar or 1-D) on any HDF5 object. Writers replace an existing
// attribute of the same name; readers accept variable- and fixed-length
// strings. Errors name the attribute.
Status WriteAttr(hid_t obj, const char* name, std::string_view value,
                 StringStorage storage = StringStorage::kVariableUtf8);
Status WriteAttr(hid_t obj, const char* name, const std::vector<std::string>& values);
Status WriteAttr(hid_t obj, const char* name, int64_t value);
Status WriteAttr(hid_t obj, const char* name, const std::vector<int64_t>& values);
Status WriteAttr(hid_t obj, const char* name, const std::vector<double>& values);

bool HasAttr(hid_t obj, const char* name);
Result<std::string> ReadStringAttr(hid_t obj, const char* name);
Result<std::vector<std::string>> ReadStringListAttr(hid_t obj, const char* name);
Result<int64_t> ReadIntAttr(hid_t obj, const char* name);
Result<std::vector<int64_t>> ReadIntListAttr(hid_t obj, const char* name);
Result<std::vector<double>> ReadDoubleListAttr(hid_t obj, const char* name);

// Extent of a dataset (rank and dims); errors name `what`.
Result<std::vector<hsize_t>> DatasetDims(hid_t dset, std::string_view what);

// Writes the HDF5 file `path` whole: `write(file)` fills a new file created
// beside it (path + ".tmp"), which is then flushed, closed, fsynced and
// renamed over `path` (common/fs CommitFile): a reader never sees half a file.
Status WriteFileWhole(const std::string& path, const std::function<Status(hid_t)>& write);

// An opaque byte string as a 1-D uint8 dataset `name` under `obj` (a
// serialized model, say); errors name `what`.
Status WriteBytes(hid_t obj, const char* name, std::string_view bytes, std::string_view what);
Result<std::string> ReadBytes(hid_t obj, const char* name, std::string_view what);

}  // namespace hpcml::h5
