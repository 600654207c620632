#pragma once
// Test helpers for the settings table: a variable set for one scope, and a choice read as the
// caller's enum checked against the text of every one of its values.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::settings::testing {

// `s` set to `value` (unset: nullopt) until the end of the scope, then as it was.
class SetEnv {
 public:
  SetEnv(const Setting& s, const std::optional<std::string>& value) : name_(s.name) {
    if (const char* old = std::getenv(name_.c_str())) saved_ = old;
    put(value);
  }
  ~SetEnv() { put(saved_); }
  SetEnv(const SetEnv&) = delete;
  SetEnv& operator=(const SetEnv&) = delete;

 private:
  void put(const std::optional<std::string>& value) {
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  std::string name_;
  std::optional<std::string> saved_;
};

// choice_as<E>(s) is `want` for each choice's text (in either case), the default's when unset,
// and a text not in the table is refused naming the variable; `cases` must cover every choice.
template <typename E>
void check_choice_as(const Setting& s, std::initializer_list<std::pair<std::string, E>> cases) {
  CAPTURE(s.name);
  CHECK(cases.size() == static_cast<size_t>(std::count(s.choices.begin(), s.choices.end(), '|') + 1));
  for (const auto& [text, want] : cases) {
    CAPTURE(text);
    std::string upper = text;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    for (const std::string& t : {text, upper}) {
      SetEnv env(s, t);
      CHECK(choice_as<E>(s) == want);
    }
    SetEnv unset(s, std::nullopt);
    if (text == s.fallback) CHECK(choice_as<E>(s) == want);
  }
  SetEnv bad(s, "no-such-choice");
  const std::string named = std::string(s.name) + "='no-such-choice': one of ";
  CHECK_THROWS_WITH_AS(choice_as<E>(s), doctest::Contains(named.c_str()), InvalidArgument);
}

}  // namespace ddp::settings::testing
