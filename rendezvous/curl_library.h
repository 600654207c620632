#pragma once
// libcurl, loaded when etcd is first used (dlopen of libcurl.so.4), not at program start: linked
// directly, it and the ~30 libraries it needs (TLS, Kerberos, LDAP, ...) are mapped and relocated
// by every ddp-launch and every worker, etcd or not, and were most of the launcher's start-up
// time (bench/results/*-launch). The calls are libcurl's own, through the table below.
//
// curl() loads the library once (thread-safe) and returns the table, or throws StoreError naming
// the library and dlerror() when libcurl 4 is not installed. The library stays loaded.
#include <curl/curl.h>

namespace ddp::rdzv {

struct CurlLibrary {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  CURLcode (*easy_perform)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
  CURLM* (*multi_init)();
  CURLMcode (*multi_cleanup)(CURLM*);
  CURLMcode (*multi_add_handle)(CURLM*, CURL*);
  CURLMcode (*multi_remove_handle)(CURLM*, CURL*);
  CURLMcode (*multi_perform)(CURLM*, int*);
  CURLMcode (*multi_poll)(CURLM*, curl_waitfd*, unsigned int, int, int*);
  CURLMcode (*multi_wakeup)(CURLM*);
  CURLMsg* (*multi_info_read)(CURLM*, int*);
};

// The loaded library, curl_global_init(CURL_GLOBAL_DEFAULT) done once.
const CurlLibrary& curl();

}  // namespace ddp::rdzv
