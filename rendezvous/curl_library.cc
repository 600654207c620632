#include "rendezvous/curl_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "common/error.h"

namespace ddp::rdzv {
namespace {

constexpr const char* kSoname = "libcurl.so.4";

template <typename F>
void bind(void* lib, F& slot, const char* name) {
  void* sym = ::dlsym(lib, name);
  if (sym == nullptr)
    DDP_THROW(StoreError, "etcd: ", kSoname, " has no ", name, " (libcurl older than 7.68?)");
  slot = reinterpret_cast<F>(sym);
}

CurlLibrary load() {
  void* lib = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    DDP_THROW(StoreError, "etcd needs libcurl (", kSoname, "): ", why ? why : "not found",
              " (Debian: apt-get install libcurl4)");
  }
  CurlLibrary c{};
  bind(lib, c.global_init, "curl_global_init");
  bind(lib, c.easy_init, "curl_easy_init");
  bind(lib, c.easy_cleanup, "curl_easy_cleanup");
  bind(lib, c.easy_reset, "curl_easy_reset");
  bind(lib, c.easy_setopt, "curl_easy_setopt");
  bind(lib, c.easy_getinfo, "curl_easy_getinfo");
  bind(lib, c.easy_perform, "curl_easy_perform");
  bind(lib, c.easy_strerror, "curl_easy_strerror");
  bind(lib, c.slist_append, "curl_slist_append");
  bind(lib, c.slist_free_all, "curl_slist_free_all");
  bind(lib, c.multi_init, "curl_multi_init");
  bind(lib, c.multi_cleanup, "curl_multi_cleanup");
  bind(lib, c.multi_add_handle, "curl_multi_add_handle");
  bind(lib, c.multi_remove_handle, "curl_multi_remove_handle");
  bind(lib, c.multi_perform, "curl_multi_perform");
  bind(lib, c.multi_poll, "curl_multi_poll");
  bind(lib, c.multi_wakeup, "curl_multi_wakeup");
  bind(lib, c.multi_info_read, "curl_multi_info_read");
  c.global_init(CURL_GLOBAL_DEFAULT);
  return c;
}

}  // namespace

const CurlLibrary& curl() {
  // A failed load throws out of call_once, which then runs again on the next call.
  static CurlLibrary lib;
  static std::once_flag once;
  std::call_once(once, [] { lib = load(); });
  return lib;
}

}  // namespace ddp::rdzv
