#pragma once
// Compatibility header: Debian's libgloo-dev (0.0~git20220518) installs the tcp transport
// headers but not gloo/common/memory.h, which they include. The backend needs two of those
// headers (to abort a context and to read a pair's peer address), so this declares the three
// smart-pointer boxes they name, with the same members as the library was built with (a
// shared_ptr or a weak_ptr), so layouts agree. Used only when the real header is missing
// (comm/gloo/CMakeLists.txt); nothing here is called by our code.
#include <memory>
#include <thread>

namespace gloo {

template <typename T>
class WeakNonOwningPtr;
template <typename T>
class ShareableNonOwningPtr;

template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& weak) : ptr_(weak.ptr_.lock()) {}
  T* operator->() const noexcept { return ptr_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ptr_); }

 private:
  std::shared_ptr<T> ptr_;
};

template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& root) : ptr_(root.ptr_) {}

 protected:
  std::weak_ptr<T> ptr_;
  friend class NonOwningPtr<T>;
};

template <typename T>
class ShareableNonOwningPtr final {
 public:
  explicit ShareableNonOwningPtr(T* t) : ptr_(t, [](T*) {}) {}
  ShareableNonOwningPtr(const ShareableNonOwningPtr&) = delete;
  ShareableNonOwningPtr& operator=(const ShareableNonOwningPtr&) = delete;
  ~ShareableNonOwningPtr() {
    std::weak_ptr<T> weak(ptr_);
    ptr_.reset();
    while (!weak.expired()) std::this_thread::yield();  // wait out users on other threads
  }

 protected:
  std::shared_ptr<T> ptr_;
  friend class WeakNonOwningPtr<T>;
};

}  // namespace gloo
