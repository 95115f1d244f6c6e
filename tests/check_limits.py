#!/usr/bin/env python3
"""check_limits.py - the size limits of the house, measured on src/:

  * no source file over 800 lines (.c, .h, .cu, .cuh; generated files aside: a file that
    says "generated" and "do not edit" in its first lines);
  * no function over 120 lines, counted from the function's first line (where its
    declaration starts) to its closing brace, both included (.c and .cu files).

Prints the largest files and the longest functions, then every offender, and exits 1 when
there is one that tests/limits-allow.txt does not list. That file lists temporary
exceptions, one a line: a path ("src/io/checkpoint.c") for a file, or path:function
("src/model/fit.c:kc_fit") for a function; '#' starts a comment.

Functions are found by a small scanner, not a C parser: comments, string and character
literals and preprocessor lines are blanked, then a brace block at the top level (or inside
extern "C" { }) whose head ends with a parameter list ")" is a function. Only python3's
standard library is used.

usage: check_limits.py [--root DIR] [--allow FILE] [--top N]
"""
import argparse
import os
import re
import sys

FILE_LIMIT = 800
FUNCTION_LIMIT = 120
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
FUNCTION_EXT = (".c", ".cu")
NOT_NAMES = {"__attribute__", "__launch_bounds__", "__declspec", "__asm__", "asm", "if", "while", "for",
             "switch", "return", "sizeof", "defined"}


def blank(text):
    """The text with comments, literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            # keep the quotes so that extern "C" stays recognisable
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(head):
    """The name declared by a function head ("static int f(int x)" -> "f"), or None."""
    names = []
    depth = 0
    for m in re.finditer(r"[A-Za-z_]\w*|[()]", head):
        tok = m.group(0)
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0 and tok not in NOT_NAMES:
            rest = head[m.end():].lstrip()
            if rest.startswith("("):
                names.append(tok)
    return names[-1] if names else None


def functions(text):
    """(name, first line, last line) of each function defined in C source text."""
    code = blank(text)
    found = []
    depth = 0          # brace depth, not counting extern "C" blocks
    transparent = 0    # open extern "C" blocks
    head_start = 0     # where the current top-level declaration starts
    stack = []         # per open brace: ("fn", name, start) | ("block",) | ("extern",)
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "{":
            if depth == 0:
                head = code[head_start:i]
                if re.search(r'\bextern\s*"\s*"\s*$', head) or re.search(r'\bextern\s*"C"\s*$', head):
                    stack.append(("extern",))
                    transparent += 1
                    head_start = i + 1
                    i += 1
                    continue
                stripped = head.strip()
                is_fn = (stripped.endswith(")") and not re.search(r"=\s*$", stripped)
                         and not re.match(r"(typedef\s+)?(struct|union|enum)\b[^()]*$", stripped))
                name = function_name(stripped) if is_fn else None
                if name:
                    first = code.count("\n", 0, head_start + (len(head) - len(head.lstrip()))) + 1
                    stack.append(("fn", name, first))
                else:
                    stack.append(("block",))
            else:
                stack.append(("block",))
            depth += 1
        elif c == "}":
            top = stack.pop() if stack else ("block",)
            if top[0] == "extern":
                transparent -= 1
                head_start = i + 1
            else:
                depth -= 1
                if depth == 0:
                    if top[0] == "fn":
                        found.append((top[1], top[2], code.count("\n", 0, i) + 1))
                    head_start = i + 1
        elif c == ";" and depth == 0:
            head_start = i + 1
        i += 1
    return found


def generated(text):
    head = text[:2000].lower()
    return "generated" in head and ("do not edit" in head or "don't edit" in head)


def read_allow(path):
    allow = set()
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    allow.add(line)
    return allow


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="size limits of files and functions in src/")
    ap.add_argument("--root", default=os.path.dirname(here), help="the repository (default: this script's ..)")
    ap.add_argument("--allow", default=os.path.join(here, "limits-allow.txt"), help="temporary exceptions")
    ap.add_argument("--top", type=int, default=5, help="how many of the largest to print")
    args = ap.parse_args()

    src = os.path.join(args.root, "src")
    if not os.path.isdir(src):
        print(f"check_limits: no src/ in {args.root}", file=sys.stderr)
        return 2
    files, funcs = [], []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(SOURCE_EXT):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, args.root)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if generated(text):
                continue
            files.append((text.count("\n") + (0 if text.endswith("\n") or not text else 1), rel))
            if fn.endswith(FUNCTION_EXT):
                for name, first, last in functions(text):
                    funcs.append((last - first + 1, f"{rel}:{name}", first))
    files.sort(key=lambda x: (-x[0], x[1]))
    funcs.sort(key=lambda x: (-x[0], x[1]))

    print(f"largest files in src/ (limit {FILE_LIMIT} lines):")
    for lines, rel in files[:args.top]:
        print(f"  {lines:6d}  {rel}")
    print(f"longest functions in src/ (limit {FUNCTION_LIMIT} lines, {len(funcs)} functions):")
    for lines, key, first in funcs[:args.top]:
        print(f"  {lines:6d}  {key} (line {first})")

    allow = read_allow(args.allow)
    over = [(lines, rel, "file", FILE_LIMIT) for lines, rel in files if lines > FILE_LIMIT]
    over += [(lines, key, "function", FUNCTION_LIMIT) for lines, key, _ in funcs if lines > FUNCTION_LIMIT]
    failed = False
    for lines, key, what, limit in over:
        if key in allow:
            print(f"allowed for now: {what} {key} has {lines} lines (limit {limit}; listed in {os.path.basename(args.allow)})")
        else:
            print(f"OVER THE LIMIT: {what} {key} has {lines} lines (limit {limit})")
            failed = True
    for key in sorted(allow - {k for _, k, _, _ in over}):
        print(f"note: {key} is within the limits now: remove it from {os.path.basename(args.allow)}")
    if failed:
        print("split what is over the limit by job (DESIGN.md), or, for a fix under way on another branch, "
              "list it in tests/limits-allow.txt")
        return 1
    print("within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
