#pragma once
// The one table of environment settings. Every environment variable the libraries and tools
// read is declared here once (name, type, default, allowed values, scope, meaning) and read
// only through the accessors below, so that no module has its own parser or spelling and
// docs/environment.md (generated from this table: ddp-launch --print-settings --markdown)
// cannot drift from the code. Empty counts as unset. A value that is set but malformed or out
// of range is an InvalidArgument naming the variable and the values it allows. Scope kGroup:
// every rank of a group must hold the same value; a backend checks that once, at group
// creation, through the group's store (comm/agreed_settings.h). Thread-safe (reads only).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/settings_table.h"

namespace ddp::settings {

// Every setting, in the order of the docs.
std::span<const Setting* const> all();

// The declared setting named `name`, or the family it belongs to; nullptr when none.
const Setting* find(std::string_view name);
// What a family's members start with ("DDP_LAUNCH_" of "DDP_LAUNCH_<OPTION>"); a single
// variable's whole name.
std::string_view family_prefix(const Setting& s);

// Raw reads: the value, or nullopt when unset or empty.
std::optional<std::string> get(const Setting& s);
// A member of a family (kLaunchOption, kSlurm, ...) or any declared name; std::logic_error for
// a name the table does not declare.
std::optional<std::string> get(std::string_view name);
// As get(name), but an empty value is "" (CUDA_VISIBLE_DEVICES="" means no GPU).
std::optional<std::string> lookup(std::string_view name);
std::string get_or(const Setting& s, const std::string& fallback);

// Typed reads, validated: InvalidArgument naming the variable and the values allowed. Without
// a fallback argument the table's is used (std::logic_error when the table has none).
std::string choice(const Setting& s);  // kChoice
std::optional<int64_t> get_int(const Setting& s);
int64_t int_or(const Setting& s, int64_t fallback);
int64_t int_value(const Setting& s);
std::optional<bool> get_bool(const Setting& s);
bool bool_or(const Setting& s, bool fallback);
bool bool_value(const Setting& s);

// A kChoice setting's value as its index in the table's list ("auto|direct|hd|ring": 0..3), and
// as the caller's enum E, whose enumerators 0, 1, ... are those choices in that order; the
// enum's source file pins the order at compile time with choices_are:
//   static_assert(settings::choices_are(settings::kTcpSocketAlgo, "auto|direct|hd|ring"));
size_t choice_index(const Setting& s);
template <typename E>
requires std::is_enum_v<E> E choice_as(const Setting& s) { return static_cast<E>(choice_index(s)); }
constexpr bool choices_are(const Setting& s, std::string_view list) {
  return s.type == Type::kChoice && s.choices == list;
}
// kAutoInt, kAutoBool: nullopt for "auto" (set so in any case, or the table's default).
std::optional<int64_t> auto_int(const Setting& s);
std::optional<bool> auto_bool(const Setting& s);

// The early check, one call: every variable of `section` read and validated as its type, so a
// bad one is an InvalidArgument now, before its reader's first use (families are not read).
void check(Section section);

// 1/0, true/false, yes/no, on/off in any case; nullopt for anything else.
std::optional<bool> parse_bool(const std::string& text);

// The value as ranks compare it: canonical for ints, booleans and auto, the table's fallback when
// unset, "" when unset with a computed default; validated like the typed reads.
std::string effective(const Setting& s);

// "an integer from 2 to 64", "one of auto, shm, socket", "1/0, true/false, yes/no, on/off".
std::string allowed_text(const Setting& s);
const char* to_string(Scope scope);
const char* to_string(Section section);

// The table for people: with the values in effect in this process, or as docs/environment.md.
std::string format_table();
std::string format_markdown();

}  // namespace ddp::settings
