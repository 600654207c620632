// The doctest main every suite links. One skip convention for ctest (docs/design.md, Testing):
// a binary in which no test case ran and at least one was skipped by a run-time condition
// (doctest::skip(!has_gpu()) and the like) exits 77, which ddp_test() maps to Skipped with
// SKIP_RETURN_CODE. (A skip-decorated case that a -tc filter also leaves out counts too: with
// no case run, "skipped" is the honest word either way.)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

struct SkipCounter : doctest::IReporter {
  static inline int ran = 0;
  static inline int skipped = 0;  // by a skip decorator

  explicit SkipCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++ran; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    if (tc.m_skip) ++skipped;
  }
};

REGISTER_LISTENER("ddp_skip_counter", 1, SkipCounter);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  if (rc == 0 && SkipCounter::ran == 0 && SkipCounter::skipped > 0) {
    std::printf("[ddp] no test case ran, %d skipped at run time: exit 77 (ctest: Skipped)\n",
                SkipCounter::skipped);
    return 77;
  }
  return rc;
}
