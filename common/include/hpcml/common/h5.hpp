// RAII owners for HDF5 handles (hid_t) and the conversion of HDF5's error
// stack into a Status. Part of target hpcml::h5 (common/ links HDF5 only here).
//
// Contract: an Owner owns exactly one open identifier of its kind and
// closes it with the matching H5*close on destruction; move-only; never
// throws. Debian's HDF5 1.10 is built thread-safe (H5is_library_threadsafe
// is true: one global lock), so several threads may call HDF5, one at a time.
#pragma once

#include <hdf5.h>

#include <string>
#include <string_view>
#include <utility>

#include "hpcml/common/owner.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::h5 {

// An identifier closed with its kind's H5*close (hpcml::Owner).
template <herr_t (*Close)(hid_t)>
using Owner = hpcml::Owner<CloseWith<hid_t, Close, H5I_INVALID_HID>>;

using File = Owner<H5Fclose>;
using Group = Owner<H5Gclose>;
using Dataset = Owner<H5Dclose>;
using Dataspace = Owner<H5Sclose>;
using Datatype = Owner<H5Tclose>;
using Attribute = Owner<H5Aclose>;
using PropList = Owner<H5Pclose>;

// Turns off HDF5's printing of its error stack to stderr for the calling
// thread (thread-safe HDF5 keeps one error stack per thread: call it in
// every thread that uses HDF5); errors are reported through Status instead.
// Idempotent.
void SilenceErrorPrinting();

// The innermost messages of HDF5's current error stack, e.g.
// "unable to open file: file signature not found".
std::string LastErrorText();

// Checks an identifier returned by an H5 call: `id` on success, otherwise an
// IoError "<what>: <HDF5 error text>".
Result<hid_t> Check(hid_t id, std::string_view what);
// Checks an herr_t result.
Status CheckErr(herr_t err, std::string_view what);

}  // namespace hpcml::h5
