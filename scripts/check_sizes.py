#!/usr/bin/env python3
"""Sizes of C++ sources against the house limits: files, functions, comment blocks.

usage: check_sizes.py [--max-file N] [--max-function N] [--max-comment N] [--exceptions FILE]
                      [--quiet] FILE_OR_DIR...
Prints every file's lines, its longest function and its longest comment block (directories are
searched recursively for .h and .cc), then each breach; exits 1 when there is one. Functions are
found by their braces (a body whose header ends in a parameter list, with its qualifiers or a
constructor's initialisers), on the text with comments, literals and preprocessor lines blanked:
a heuristic that is exact for this project's clang-formatted code, not a C++ parser.

--exceptions names the recorded breaches (scripts/size_exceptions.txt, paths relative to where
the script runs): one may stay at its recorded size or shrink; it is a breach to grow past it, and
to keep the line once the item is within the limits (or gone), so the list only shrinks.
"""
import argparse
import os
import re
import sys

# On a header with comments, strings and directives blanked (extern "C" reads extern " ").
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|^extern \" \"$")
FUNCTION = re.compile(r"\)\s*(const|noexcept|override|final|mutable|->[^{]*|\s)*$")
CTOR_INIT = re.compile(r"\)\s*(noexcept\s*)?:\s*\w")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")


IDENT_TAIL = re.compile(r"[0-9A-Za-z_.]*$")


def strip_code(text):
    """The text with comments, strings, characters and preprocessor lines blanked (newlines kept).

    A ' after a number's digits is a digit separator (30'000), not a character literal; R" opens a
    raw string only alone or after an encoding prefix (u8R"(...)"), not at an identifier's end.
    """
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        before = IDENT_TAIL.search(text, max(0, i - 64), i).group(0) if c in "'R#" else ""
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            j = i  # a directive runs to the first newline not escaped by a backslash
            while True:
                j = text.find("\n", j)
                if j < 0 or not text[i:j].rstrip(" \t").endswith("\\"):
                    break
                j += 1
            j = n if j < 0 else j
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and before in ("", "u8", "u", "U", "L"):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and before[:1].isdigit():
            out.append(" ")
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def brace_kind(header, stack):
    """What the { after `header` opens: function, block, container, or init (a braced value inside
    an expression or a constructor's initialisers, which continues the header it is part of)."""
    h = " ".join(header.split())
    if stack and stack[-1][0] == "init" or h.count("(") > h.count(")"):
        return "init"  # f(Options{...}), a default argument = {}, a lambda passed as an argument
    if any(k in ("function", "block") for k, _, _ in stack):
        return "block"
    if CTOR_INIT.search(h):
        return "init" if re.search(r"[\w>]$", h) else "function"  # member_{...}, or the body
    if FUNCTION.search(h):
        return "block" if CONTROL.match(h) else "function"
    if CONTAINER.search(h):
        return "container"
    return "block" if stack else "container"


def function_name(text, code, start, brace):
    """The name in the header code[start:brace]; a macro's with its arguments as written
    (TEST_CASE("a store restarts")), so that two test cases have two names."""
    h = " ".join(code[start:brace].split())
    name = re.sub(r"\s*\(.*", "", h).split(" ")[-1] if h else "?"
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and h.endswith(")"):
        return " ".join(text[code.rfind(name, start, brace):code.rfind(")", start, brace) + 1].split())
    return name


def functions(text):
    """(name, first line, lines) of every function body that is not inside another."""
    code = strip_code(text)
    found, stack, header_start = [], [], 0
    for i, c in enumerate(code):
        in_init = bool(stack) and stack[-1][0] == "init"
        if c == ";" and not in_init:
            header_start = i + 1
        elif c == "}" and stack:
            kind, start_line, name = stack.pop()
            if kind == "function":
                end_line = code.count("\n", 0, i) + 1
                found.append((name, start_line, end_line - start_line + 1))
            if kind != "init":
                header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            kind = brace_kind(header, stack)
            h = " ".join(header.split())
            start_line = code.count("\n", 0, header_start + len(header) - len(header.lstrip())) + 1
            stack.append((kind, start_line, function_name(text, code, header_start, i)))
            if kind != "init":
                header_start = i + 1
    return found


def comment_blocks(lines):
    """(first line, length) of the longest run of lines that are only a // comment."""
    best, run, start = (0, 0), 0, 0
    for k, line in enumerate(lines, 1):
        if line.strip().startswith("//"):
            if run == 0:
                start = k
            run += 1
            if run > best[1]:
                best = (start, run)
        else:
            run = 0
    return best


def sources(paths):
    """The .h/.cc files named, and those under the directories named (recursively), sorted."""
    files = []
    for p in paths:
        if not os.path.isdir(p):
            files.append(p)
            continue
        for root, dirs, names in os.walk(p):
            dirs.sort()
            files += sorted(os.path.join(root, f) for f in names if f.endswith((".h", ".cc")))
    return [os.path.normpath(f) for f in files]


def read_exceptions(path):
    """{(file, what): size} from lines `FILE file|comment|function:NAME SIZE  # why` (NAME may hold
    spaces: a test case's; a # after a space starts a comment)."""
    known = {}
    for k, line in enumerate(open(path, encoding="utf-8"), 1):
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        if not line:
            continue
        parts = line.split()
        what = " ".join(parts[1:-1])
        if len(parts) < 3 or not parts[-1].isdigit() or what.split(":")[0] not in ("file", "comment", "function"):
            sys.exit(f"{path}:{k}: expected 'FILE file|comment|function:NAME SIZE', got {line!r}")
        known[(os.path.normpath(parts[0]), what)] = int(parts[-1])
    return known


def measure(f, limits):
    """[(what, line, size)] of every item of `f` over its limit, and the file's summary row."""
    text = open(f, encoding="utf-8").read()
    lines = text.split("\n")
    n = len(lines) - (1 if text.endswith("\n") else 0)
    fns = functions(text)
    longest = max(fns, key=lambda x: x[2], default=("-", 0, 0))
    cstart, clen = comment_blocks(lines)
    over = [(f"function:{name}", line, size) for name, line, size in fns if size > limits["function"]]
    if n > limits["file"]:
        over.insert(0, ("file", 1, n))
    if clen > limits["comment"]:
        over.append(("comment", cstart, clen))
    return over, f"{f:48} {n:6} {longest[0][:22] + ' ' + str(longest[2]):>30} {clen:14}"


def judge(files, limits, known, quiet):
    """The breaches: items over their limit and not excepted, excepted items that grew, and
    exceptions whose item is back within its limit (the list only shrinks)."""
    breaches, notes, seen = [], [], set()
    if not quiet:
        print(f"{'file':48} {'lines':>6} {'longest function':>30} {'comment block':>14}")
    for f in files:
        over, row = measure(f, limits)
        if not quiet:
            print(row)
        for what, line, size in over:
            kind = what.split(":")[0]
            allowed = known.get((f, what))
            seen.add((f, what))
            label = {"file": "file", "comment": "comment block"}.get(kind, "function " + what[len("function:"):])
            if allowed is None:
                breaches.append(f"{f}:{line}: {label} is {size} lines (> {limits[kind]})")
            elif size > allowed:
                breaches.append(f"{f}:{line}: {label} is {size} lines, more than the {allowed} excepted")
            elif size < allowed:
                notes.append(f"{f}:{line}: {label} is {size} lines: lower its exception from {allowed}")
    scanned = set(files)
    for f, what in sorted(known):
        if not os.path.exists(f):
            breaches.append(f"{f}: no such file: remove its exception ({what})")
        elif f in scanned and (f, what) not in seen:
            breaches.append(f"{f}: {what} is within the limits now: remove its exception")
    return breaches, notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-comment", type=int, default=12)
    ap.add_argument("--exceptions", help="file of recorded breaches (scripts/size_exceptions.txt)")
    ap.add_argument("--quiet", action="store_true", help="print only breaches and the total")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    limits = {"file": a.max_file, "function": a.max_function, "comment": a.max_comment}
    known = read_exceptions(a.exceptions) if a.exceptions else {}
    files = sources(a.paths)
    breaches, notes = judge(files, limits, known, a.quiet)
    for note in notes:
        print("NOTE", note)
    for b in breaches:
        print("BREACH", b)
    print(f"{len(files)} files, {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
