#!/usr/bin/env python3
"""Sizes of C++ sources against the house limits: files, functions, comment blocks.

usage: check_sizes.py [--max-file N] [--max-function N] [--max-comment N] FILE_OR_DIR...
Prints every file's lines, its longest function and its longest comment block, then each
breach; exits 1 when there is one. Functions are found by their braces (a body whose header
ends in a parameter list, with its qualifiers or a constructor's initialisers): a heuristic
that is exact for this project's clang-formatted code, not a C++ parser.
"""
import argparse
import os
import re
import sys

CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|^\s*extern\s+\"C\"")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")


def strip_code(text):
    """The text with comments, strings and characters blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
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
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
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


def functions(text):
    """(name, first line, lines) of every function body that is not inside another."""
    code = strip_code(text)
    found, stack, header_start = [], [], 0
    for i, c in enumerate(code):
        if c in ";}":
            if c == "}" and stack:
                kind, start_line, name = stack.pop()
                if kind == "function":
                    end_line = code.count("\n", 0, i) + 1
                    found.append((name, start_line, end_line - start_line + 1))
            header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            inside_function = any(k in ("function", "block") for k, _, _ in stack)
            h = " ".join(header.split())
            if inside_function:
                kind = "block"
            elif CONTAINER.search(h) and not h.endswith(")"):
                kind = "container"
            elif re.search(r"\)\s*(const|noexcept|override|final|mutable|->[^{]*|\s)*$", h) or re.search(
                    r"\)\s*:\s*\w", h):
                kind = "block" if CONTROL.match(h) else "function"
            else:
                kind = "block" if stack else "container"
            start_line = code.count("\n", 0, header_start + len(header) - len(header.lstrip())) + 1
            name = re.sub(r"\s*\(.*", "", h).split(" ")[-1] if h else "?"
            stack.append((kind, start_line, name))
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-comment", type=int, default=12)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith((".h", ".cc")))
        else:
            files.append(p)
    breaches = []
    print(f"{'file':48} {'lines':>6} {'longest function':>30} {'comment block':>14}")
    for f in files:
        text = open(f, encoding="utf-8").read()
        lines = text.split("\n")
        n = len(lines) - (1 if text.endswith("\n") else 0)
        fns = functions(text)
        longest = max(fns, key=lambda x: x[2], default=("-", 0, 0))
        cstart, clen = comment_blocks(lines)
        print(f"{f:48} {n:6} {longest[0][:22] + ' ' + str(longest[2]):>30} {clen:14}")
        if n > a.max_file:
            breaches.append(f"{f}: {n} lines (> {a.max_file})")
        for name, line, length in fns:
            if length > a.max_function:
                breaches.append(f"{f}:{line}: function {name} is {length} lines (> {a.max_function})")
        if clen > a.max_comment:
            breaches.append(f"{f}:{cstart}: comment block of {clen} lines (> {a.max_comment})")
    for b in breaches:
        print("BREACH", b)
    print(f"{len(files)} files, {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
