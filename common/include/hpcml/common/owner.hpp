// Owner: the one way hpcml owns a C handle (a file descriptor, an HDF5 id, an
// MPI communicator, an hwloc topology, a CUDA stream ...).
//
// Contract: an Owner holds at most one handle and releases it exactly once,
// with Traits::Close, on destruction or reset; move-only; never throws.
// Traits provides
//   using Handle = ...;                       the C type
//   static Handle Null() noexcept;            the "no handle" value
//   static void Close(Handle h) noexcept;     called only for h != Null()
// CloseWith<T, Fn, Null> is the traits of the common case: a function that
// takes the handle by value, and a constant null. Not thread-safe: one owner
// uses it at a time.
#pragma once

#include <utility>

namespace hpcml {

template <typename Traits>
class Owner {
 public:
  using Handle = typename Traits::Handle;

  Owner() = default;
  explicit Owner(Handle h) noexcept : h_(h) {}
  ~Owner() { reset(); }
  Owner(Owner&& o) noexcept : h_(o.release()) {}
  Owner& operator=(Owner&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

  Handle get() const noexcept { return h_; }
  bool valid() const noexcept { return h_ != Traits::Null(); }
  explicit operator bool() const noexcept { return valid(); }
  // Gives up ownership without closing.
  Handle release() noexcept { return std::exchange(h_, Traits::Null()); }
  // Closes the held handle (if any) and takes `h`.
  void reset(Handle h = Traits::Null()) noexcept {
    const Handle old = std::exchange(h_, h);
    if (old != Traits::Null() && old != h) Traits::Close(old);
  }

 private:
  Handle h_ = Traits::Null();
};

template <typename T, auto CloseFn, T NullValue = T{}>
struct CloseWith {
  using Handle = T;
  static constexpr T Null() noexcept { return NullValue; }
  static void Close(T h) noexcept { (void)CloseFn(h); }
};

}  // namespace hpcml
