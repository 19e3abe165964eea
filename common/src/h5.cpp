#include "hpcml/common/h5.hpp"

#include "hpcml/common/fs.hpp"

#include <algorithm>
#include <cstring>

namespace hpcml::h5 {
namespace {

struct WalkState {
  std::vector<std::string> descs;
};

herr_t CollectError(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* state = static_cast<WalkState*>(data);
  std::string desc = err->desc != nullptr ? err->desc : "";
  if (desc.empty()) {
    char buf[256] = {0};
    if (H5Eget_msg(err->min_num, nullptr, buf, sizeof buf) > 0) desc = buf;
  }
  if (!desc.empty() && (state->descs.empty() || state->descs.back() != desc)) {
    state->descs.push_back(std::move(desc));
  }
  return 0;
}

// A string type for attributes: variable-length UTF-8.
Result<Datatype> VlenStringType() {
  HPCML_ASSIGN_OR_RETURN(Datatype t,
                         Own<Datatype>(H5Tcopy(H5T_C_S1), StatusCode::kInternal, "string type"));
  if (H5Tset_size(t.get(), H5T_VARIABLE) < 0 || H5Tset_cset(t.get(), H5T_CSET_UTF8) < 0) {
    return Error(StatusCode::kInternal, "string type");
  }
  return t;
}

// A fixed-length string type of `size` bytes (at least one).
Result<Datatype> FixedStringType(size_t size) {
  HPCML_ASSIGN_OR_RETURN(Datatype t,
                         Own<Datatype>(H5Tcopy(H5T_C_S1), StatusCode::kInternal, "string type"));
  if (H5Tset_size(t.get(), std::max<size_t>(1, size)) < 0) {
    return Error(StatusCode::kInternal, "string type");
  }
  return t;
}

Status Replace(hid_t obj, const char* name) {
  htri_t exists = H5Aexists(obj, name);
  if (exists < 0) return Error(StatusCode::kIoError, fmt::format("attribute {}", name));
  if (exists > 0 && H5Adelete(obj, name) < 0) {
    return Error(StatusCode::kIoError, fmt::format("replace attribute {}", name));
  }
  return Status::Ok();
}

Result<Attribute> CreateAttr(hid_t obj, const char* name, hid_t type, hid_t space) {
  HPCML_RETURN_IF_ERROR(Replace(obj, name));
  return Own<Attribute>(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                        StatusCode::kIoError, fmt::format("create attribute {}", name));
}

Result<Dataspace> SimpleSpace(hsize_t n) {
  return Own<Dataspace>(H5Screate_simple(1, &n, nullptr), StatusCode::kInternal, "dataspace");
}

Result<Attribute> OpenAttr(hid_t obj, const char* name) {
  htri_t exists = H5Aexists(obj, name);
  if (exists < 0) return Error(StatusCode::kCorrupt, fmt::format("attribute {}", name));
  if (exists == 0) return NotFound("attribute {} is missing", name);
  return Own<Attribute>(H5Aopen(obj, name, H5P_DEFAULT), StatusCode::kCorrupt,
                        fmt::format("open attribute {}", name));
}

Result<hssize_t> AttrPoints(hid_t attr, const char* name) {
  HPCML_ASSIGN_OR_RETURN(Dataspace space, Own<Dataspace>(H5Aget_space(attr), StatusCode::kCorrupt,
                                                         fmt::format("attribute {}", name)));
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) return Error(StatusCode::kCorrupt, fmt::format("attribute {}", name));
  return n;
}

Result<Dataspace> ScalarSpace() {
  return Own<Dataspace>(H5Screate(H5S_SCALAR), StatusCode::kInternal, "dataspace");
}

// Creates attribute `name` (replacing one of that name) of `file_type` over
// `space`, writes `data` as `mem_type` (nothing when null) and closes it.
Status WriteAttrData(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
                     const Dataspace& space, const void* data) {
  HPCML_ASSIGN_OR_RETURN(Attribute attr, CreateAttr(obj, name, file_type, space.get()));
  if (data != nullptr && H5Awrite(attr.get(), mem_type, data) < 0) {
    return Error(StatusCode::kIoError, fmt::format("write attribute {}", name));
  }
  return Close(attr, fmt::format("attribute {}", name));
}

}  // namespace

void SilenceErrorPrinting() {
  // The thread-safe build keeps the default error stack per thread.
  thread_local bool done = false;
  if (done) return;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  done = true;
}

Status Error(StatusCode code, std::string_view context) {
  WalkState state;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, CollectError, &state);
  H5Eclear2(H5E_DEFAULT);
  std::string detail;
  if (state.descs.empty()) {
    detail = "HDF5 call failed";
  } else if (state.descs.size() == 1) {
    detail = state.descs.front();
  } else {
    // Outermost (what was attempted) and innermost (why it failed).
    detail = state.descs.front() + " (" + state.descs.back() + ")";
  }
  if (context.empty()) return Status(code, detail);
  return Status(code, fmt::format("{}: {}", context, detail));
}

Result<hid_t> Check(hid_t id, std::string_view what) {
  if (id >= 0) return id;
  return Error(StatusCode::kIoError, what);
}

Status CheckErr(herr_t err, std::string_view what) {
  if (err >= 0) return Status::Ok();
  return Error(StatusCode::kIoError, what);
}

Status WriteAttr(hid_t obj, const char* name, std::string_view value, StringStorage storage) {
  const bool fixed = storage == StringStorage::kFixed;
  HPCML_ASSIGN_OR_RETURN(Datatype t, fixed ? FixedStringType(value.size()) : VlenStringType());
  HPCML_ASSIGN_OR_RETURN(Dataspace space, ScalarSpace());
  std::string copy(value);
  const char* p = copy.c_str();
  return WriteAttrData(obj, name, t.get(), t.get(), space,
                       fixed ? static_cast<const void*>(p) : &p);
}

Status WriteAttr(hid_t obj, const char* name, const std::vector<std::string>& values) {
  HPCML_ASSIGN_OR_RETURN(Datatype t, VlenStringType());
  HPCML_ASSIGN_OR_RETURN(Dataspace space, SimpleSpace(values.size()));
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size());
  for (const auto& v : values) ptrs.push_back(v.c_str());
  return WriteAttrData(obj, name, t.get(), t.get(), space, values.empty() ? nullptr : ptrs.data());
}

Status WriteAttr(hid_t obj, const char* name, int64_t value) {
  HPCML_ASSIGN_OR_RETURN(Dataspace space, ScalarSpace());
  return WriteAttrData(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, &value);
}

Status WriteAttr(hid_t obj, const char* name, const std::vector<int64_t>& values) {
  HPCML_ASSIGN_OR_RETURN(Dataspace space, SimpleSpace(values.size()));
  return WriteAttrData(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space,
                       values.empty() ? nullptr : values.data());
}

Status WriteAttr(hid_t obj, const char* name, const std::vector<double>& values) {
  HPCML_ASSIGN_OR_RETURN(Dataspace space, SimpleSpace(values.size()));
  return WriteAttrData(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space,
                       values.empty() ? nullptr : values.data());
}

bool HasAttr(hid_t obj, const char* name) {
  return H5Aexists(obj, name) > 0;
}

Result<std::vector<std::string>> ReadStringListAttr(hid_t obj, const char* name) {
  HPCML_ASSIGN_OR_RETURN(Attribute attr, OpenAttr(obj, name));
  HPCML_ASSIGN_OR_RETURN(Datatype ftype,
                         Own<Datatype>(H5Aget_type(attr.get()), StatusCode::kCorrupt,
                                       fmt::format("attribute {}", name)));
  if (H5Tget_class(ftype.get()) != H5T_STRING) return Corrupt("attribute {} is not a string", name);
  HPCML_ASSIGN_OR_RETURN(hssize_t n, AttrPoints(attr.get(), name));
  std::vector<std::string> out;
  if (n == 0) return out;
  out.reserve(static_cast<size_t>(n));
  htri_t variable = H5Tis_variable_str(ftype.get());
  if (variable < 0) return Error(StatusCode::kCorrupt, fmt::format("attribute {}", name));
  HPCML_ASSIGN_OR_RETURN(Datatype mtype,
                         Own<Datatype>(H5Tcopy(H5T_C_S1), StatusCode::kInternal, "string type"));
  H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
  if (variable > 0) {
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    if (H5Aread(attr.get(), mtype.get(), ptrs.data()) < 0) {
      return Error(StatusCode::kCorrupt, fmt::format("read attribute {}", name));
    }
    for (char* p : ptrs) out.emplace_back(p != nullptr ? p : "");
    HPCML_ASSIGN_OR_RETURN(Dataspace space,
                           Own<Dataspace>(H5Aget_space(attr.get()), StatusCode::kCorrupt, name));
    H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    size_t size = H5Tget_size(ftype.get());
    if (size == 0) return Corrupt("attribute {} has a zero-size string type", name);
    H5Tset_size(mtype.get(), size);
    std::vector<char> buf(size * static_cast<size_t>(n));
    if (H5Aread(attr.get(), mtype.get(), buf.data()) < 0) {
      return Error(StatusCode::kCorrupt, fmt::format("read attribute {}", name));
    }
    for (hssize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + static_cast<size_t>(i) * size;
      out.emplace_back(p, strnlen(p, size));
    }
  }
  return out;
}

Result<std::string> ReadStringAttr(hid_t obj, const char* name) {
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> list, ReadStringListAttr(obj, name));
  if (list.size() != 1)
    return Corrupt("attribute {} holds {} strings, expected one", name, list.size());
  return std::move(list.front());
}

Result<std::vector<int64_t>> ReadIntListAttr(hid_t obj, const char* name) {
  HPCML_ASSIGN_OR_RETURN(Attribute attr, OpenAttr(obj, name));
  HPCML_ASSIGN_OR_RETURN(Datatype ftype,
                         Own<Datatype>(H5Aget_type(attr.get()), StatusCode::kCorrupt,
                                       fmt::format("attribute {}", name)));
  if (H5Tget_class(ftype.get()) != H5T_INTEGER)
    return Corrupt("attribute {} is not an integer", name);
  HPCML_ASSIGN_OR_RETURN(hssize_t n, AttrPoints(attr.get(), name));
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()) < 0) {
    return Error(StatusCode::kCorrupt, fmt::format("read attribute {}", name));
  }
  return out;
}

Result<int64_t> ReadIntAttr(hid_t obj, const char* name) {
  HPCML_ASSIGN_OR_RETURN(std::vector<int64_t> list, ReadIntListAttr(obj, name));
  if (list.size() != 1)
    return Corrupt("attribute {} holds {} values, expected one", name, list.size());
  return list.front();
}

Result<std::vector<double>> ReadDoubleListAttr(hid_t obj, const char* name) {
  HPCML_ASSIGN_OR_RETURN(Attribute attr, OpenAttr(obj, name));
  HPCML_ASSIGN_OR_RETURN(Datatype ftype,
                         Own<Datatype>(H5Aget_type(attr.get()), StatusCode::kCorrupt,
                                       fmt::format("attribute {}", name)));
  H5T_class_t cls = H5Tget_class(ftype.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) return Corrupt("attribute {} is not numeric", name);
  HPCML_ASSIGN_OR_RETURN(hssize_t n, AttrPoints(attr.get(), name));
  std::vector<double> out(static_cast<size_t>(n));
  if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_DOUBLE, out.data()) < 0) {
    return Error(StatusCode::kCorrupt, fmt::format("read attribute {}", name));
  }
  return out;
}

Result<std::vector<hsize_t>> DatasetDims(hid_t dset, std::string_view what) {
  HPCML_ASSIGN_OR_RETURN(Dataspace space,
                         Own<Dataspace>(H5Dget_space(dset), StatusCode::kCorrupt, what));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return Error(StatusCode::kCorrupt, what);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return Error(StatusCode::kCorrupt, what);
  }
  return dims;
}

Status WriteFileWhole(const std::string& path, const std::function<Status(hid_t)>& write) {
  SilenceErrorPrinting();
  const std::string tmp = path + ".tmp";
  {
    HPCML_ASSIGN_OR_RETURN(
        File file, Own<File>(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                             StatusCode::kIoError, fmt::format("{}: cannot create", tmp)));
    HPCML_RETURN_IF_ERROR(write(file.get()));
    HPCML_RETURN_IF_ERROR(CheckErr(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), tmp));
  }
  return CommitFile(tmp, path);
}

Status WriteBytes(hid_t obj, const char* name, std::string_view bytes, std::string_view what) {
  const hsize_t n = bytes.size();
  HPCML_ASSIGN_OR_RETURN(Dataspace space, Own<Dataspace>(H5Screate_simple(1, &n, nullptr),
                                                         StatusCode::kInternal, what));
  HPCML_ASSIGN_OR_RETURN(Dataset ds, Own<Dataset>(H5Dcreate2(obj, name, H5T_STD_U8LE, space.get(),
                                                             H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                                  StatusCode::kInternal, what));
  return CheckErr(H5Dwrite(ds.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()),
                  what);
}

Result<std::string> ReadBytes(hid_t obj, const char* name, std::string_view what) {
  HPCML_ASSIGN_OR_RETURN(
      Dataset ds, Own<Dataset>(H5Dopen2(obj, name, H5P_DEFAULT), StatusCode::kCorrupt, what));
  HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, DatasetDims(ds.get(), what));
  if (dims.size() != 1) return Error(StatusCode::kCorrupt, what);
  std::string bytes(dims[0], '\0');
  HPCML_RETURN_IF_ERROR(CheckErr(
      H5Dread(ds.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), what));
  return bytes;
}

}  // namespace hpcml::h5
