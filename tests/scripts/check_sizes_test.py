#!/usr/bin/env python3
"""scripts/check_sizes.py on small C++ fixtures whose lengths are known: every function found at
its real length whatever its body holds (digit separators, literals, directives, lambdas,
braced initialisers), and the exceptions file's rules (a recorded item may not grow, a stale
line fails). usage: check_sizes_test.py [SCRIPT]  (default: the repository's)."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(HERE, "../../scripts/check_sizes.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import check_sizes  # noqa: E402


def body(n):
    """n statement lines."""
    return "".join(f"  step({k});\n" for k in range(n))


def lengths(text):
    return {name: size for name, _, size in check_sizes.functions(textwrap.dedent(text))}


class Functions(unittest.TestCase):
    def test_digit_separator_is_not_a_character_literal(self):
        # The false positive of issue 55: 30'000 opened a character literal that swallowed the
        # next closing braces, so a 25-line function was measured to the end of the next ones.
        text = ("int first() {\n  auto t = Millis(30'000);\n" + body(21) + "  return 0;\n}\n\n"
                "void second() {\n" + body(40) + "}\n\n"
                "char third() { return 'x'; }\n"
                "long fourth() {\n  return 0x1F'FF'00 + 1'000'000 + u8'a' + L'}';\n}\n")
        self.assertEqual(lengths(text), {"first": 25, "second": 42, "third": 1, "fourth": 3})

    def test_literals_comments_and_directives_hide_their_braces(self):
        text = r'''
            #define DDP_WRAP(x) \
              do {              \
                x;              \
              } while (0)
            #if defined(A) && (B)
            #endif
            const char* kRaw = R"json({"a": {"b": 1}})json";
            const char* kText = "}}} \" {";
            std::string fooR = "{";
            int one() {
              // } a comment's brace
              /* { another's */
              return '{' + '}';
            }
            int two(int a = '}') {
            #ifdef X
              if (a) { a = 1; }
            #else
              if (a) { a = 2; }
            #endif
              return a;
            }
        '''
        # (Each branch of an #if must balance its braces: the script reads both.)
        self.assertEqual(lengths(text), {"one": 5, "two": 8})

    def test_lambdas_and_initialisers_belong_to_their_function(self):
        text = '''
            namespace ddp {
            const std::map<int, int> kTable = {
                {1, 2},
                {3, 4},
            };
            const auto kFn = make([](int x) { return x; });
            Group::Group(Options o, std::function<void()> f = {})
                : Base(o.rank, Options{o.timeout}), members_{o.a, o.b}, name_(o.name) {
              run([this] {
                work();
              });
              std::vector<int> v{1, 2, 3};
            }
            void after() { done(); }
            }  // namespace ddp
        '''
        # A lambda passed as an argument is part of that expression, not a function of its own.
        self.assertEqual(lengths(text), {"Group::Group": 7, "after": 1})

    def test_containers_and_extern_c(self):
        text = '''
            namespace a {
            extern "C" {
            int c_api(int x) {
              return x;
            }
            }
            struct S : Base<int> {
              int m() const override {
                return 1;
              }
            };
            enum class E : int { kA, kB };
            }  // namespace a
        '''
        self.assertEqual(lengths(text), {"c_api": 3, "m": 3})

    def test_test_cases_are_named_by_their_strings(self):
        text = 'TEST_CASE("one {") {\n  a();\n}\nTEST_CASE("two") {\n  b();\n  c();\n}\n'
        self.assertEqual(lengths(text), {'TEST_CASE("one {")': 3, 'TEST_CASE("two")': 4})


class Command(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        os.makedirs(os.path.join(self.dir.name, "src", "sub"))
        self.write("src/ok.cc", "int f() {\n" + body(10) + "}\n")
        self.write("src/sub/long.cc", "// a\n" * 13 + "void g() {\n" + body(85) + "}\n")

    def write(self, path, text):
        with open(os.path.join(self.dir.name, path), "w") as f:
            f.write(text)

    def run_script(self, *args):
        p = subprocess.run([sys.executable, SCRIPT, "--quiet", *args, "src"], cwd=self.dir.name,
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    def test_breaches_fail_and_directories_are_searched(self):
        rc, out = self.run_script()
        self.assertEqual(rc, 1, out)
        self.assertIn("src/sub/long.cc:14: function g is 87 lines (> 80)", out)
        self.assertIn("src/sub/long.cc:1: comment block is 13 lines (> 12)", out)
        self.assertIn("2 files, 2 breaches", out)
        rc, out = self.run_script("--max-function", "90", "--max-comment", "13")
        self.assertEqual(rc, 0, out)

    def test_exceptions(self):
        def check(lines):
            self.write("exceptions.txt", "# recorded\n" + lines)
            return self.run_script("--exceptions", "exceptions.txt")

        rc, out = check("src/sub/long.cc function:g 87  # why\nsrc/sub/long.cc comment 13\n")
        self.assertEqual((rc, "0 breaches" in out), (0, True), out)
        rc, out = check("src/sub/long.cc function:g 86\nsrc/sub/long.cc comment 13\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("function g is 87 lines, more than the 86 excepted", out)
        rc, out = check("src/sub/long.cc function:g 90\nsrc/sub/long.cc comment 13\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("lower its exception from 90", out)
        rc, out = check("src/sub/long.cc function:g 87\nsrc/sub/long.cc comment 13\nsrc/ok.cc file 700\n"
                        "src/gone.cc function:h 100\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("src/ok.cc: file is within the limits now: remove its exception", out)
        self.assertIn("src/gone.cc: no such file: remove its exception", out)
        rc, out = check("src/sub/long.cc function:g\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("exceptions.txt:2: expected", out)


if __name__ == "__main__":
    unittest.main()
