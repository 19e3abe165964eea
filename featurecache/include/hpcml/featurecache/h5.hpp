// featurecache's layer over the HDF5 1.10 C API: the project's RAII owners
// (hpcml::h5, common/h5.hpp), HDF5 errors turned into Status with a chosen
// code and context, and typed attribute helpers.
//
// Thread safety: Debian's HDF5 is built thread-safe (one global lock), so
// these helpers may be called from any thread; a Handle itself is not shared.
// HDF5's error stack and its automatic printing are per thread in that build:
// every public entry point of featurecache calls h5::Init() first, which turns
// the printing off for the calling thread; failures are reported as Status.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::featurecache::h5 {

// Turns off HDF5's automatic error printing for the calling thread. Cheap
// after the first call on a thread.
void Init();

// The project's move-only owners (common/h5.hpp), under short local names.
using File = hpcml::h5::File;
using Group = hpcml::h5::Group;
using Dataset = hpcml::h5::Dataset;
using Space = hpcml::h5::Dataspace;
using Type = hpcml::h5::Datatype;
using Plist = hpcml::h5::PropList;
using Attr = hpcml::h5::Attribute;

// A Status built from the calling thread's HDF5 error stack, which it clears:
// "<context>: <what HDF5 said>". `context` names the file and object.
Status Error(StatusCode code, std::string_view context);

// An identifier from an HDF5 call that returned a negative id becomes an
// Error(code, context); a valid one is wrapped in its owner.
template <typename H>
Result<H> Own(hid_t id, StatusCode code, std::string_view context) {
  if (id < 0) return Error(code, context);
  return H(id);
}

// Attributes (scalar or 1-D) on any HDF5 object. Writers replace an existing
// attribute of the same name. Strings are variable-length UTF-8 (what h5py
// writes for str); readers also accept fixed-length strings.
Status WriteAttr(hid_t obj, const char* name, std::string_view value);
Status WriteAttr(hid_t obj, const char* name, const std::vector<std::string>& values);
Status WriteAttr(hid_t obj, const char* name, int64_t value);
Status WriteAttr(hid_t obj, const char* name, const std::vector<double>& values);

bool HasAttr(hid_t obj, const char* name);
Result<std::string> ReadStringAttr(hid_t obj, const char* name);
Result<std::vector<std::string>> ReadStringListAttr(hid_t obj, const char* name);
Result<int64_t> ReadIntAttr(hid_t obj, const char* name);
Result<std::vector<double>> ReadDoubleListAttr(hid_t obj, const char* name);

// Extent of a dataset (rank and dims); errors name `what`.
Result<std::vector<hsize_t>> DatasetDims(hid_t dset, std::string_view what);

// Closes `h` and reports HDF5's verdict (for a file: whether its metadata
// reached the operating system); use where a failed close means lost data.
template <herr_t (*CloseFn)(hid_t)>
Status Close(hpcml::h5::Owner<CloseFn>& h, std::string_view what) {
  if (!h.valid()) return Status::Ok();
  hid_t id = h.release();
  if (CloseFn(id) < 0) return Error(StatusCode::kIoError, what);
  return Status::Ok();
}

}  // namespace hpcml::featurecache::h5
