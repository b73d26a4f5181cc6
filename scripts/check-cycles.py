#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a cycle.

    scripts/check-cycles.py            every crate under crates/
    scripts/check-cycles.py crates/pgtide

One node per file under each crate's src/. An arrow A -> B for every path
in A that names an item of B: `use crate::x::y`, `use super::z`,
`crate::x::f(..)` in code, and paths through a child module declared in A
(`use binary::Bin` in scan/mod.rs). A path lands on the deepest file module
it names (`crate::load::copy::copy_bytes` -> load/copy.rs; a re-export
counts as an arrow to the file that re-exports it). A file using its own
ancestors (a child module using its parent's items) is not an arrow: that
is how Rust modules share their parent's vocabulary. Any other cycle, of
two files or more, is reported with the lines that make it, and the exit
status is 1.

A text scan, not a compiler: comments and string literals are skipped,
macros are not expanded. Cheap, and enough for `use` and `crate::` paths.
"""

import os
import re
import sys
from collections import defaultdict

PATH = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
IDENT_PATH = re.compile(r"(?<![:\w])([a-z_]\w*)((?:::\w+)+)")
USE = re.compile(r"\buse\s+([^;]+);", re.S)
INLINE_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")
DECL_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)


def strip(text):
    """Comments and string/char literals blanked, line breaks kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1] if i else " "):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4] + "    "):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            i += len(m.group(0)) if m else 1
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", tree)
    depth, start = 0, None
    for k, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = k
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix, inner = tree[:start], tree[start + 1:k]
                parts, d, last = [], 0, 0
                for m, c2 in enumerate(inner):
                    if c2 == "{":
                        d += 1
                    elif c2 == "}":
                        d -= 1
                    elif c2 == "," and d == 0:
                        parts.append(inner[last:m])
                        last = m + 1
                parts.append(inner[last:])
                out = []
                for p in parts:
                    if p:
                        out += expand(prefix + p)
                return out
    return [re.sub(r"as\w+$", "", tree)]


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)


def check(crate):
    src = os.path.join(crate, "src")
    files = {}
    for root, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                p = os.path.join(root, name)
                files[module_of(src, p)] = p
    children = defaultdict(set)
    for mod in files:
        if mod:
            children[mod[:-1]].add(mod[-1])

    def target(parts):
        """The deepest file module that `parts` (absolute) names."""
        for k in range(len(parts), -1, -1):
            if tuple(parts[:k]) in files:
                return tuple(parts[:k])
        return None

    edges = defaultdict(list)  # (from, to) -> [line numbers]
    for mod, path in files.items():
        text = strip(open(path, encoding="utf-8").read())
        lines = text.split("\n")
        # The module each line is in: the file's, plus inline `mod x {`.
        stack, depth, where = [], 0, []
        for line in lines:
            m = INLINE_MOD.match(line)
            if m:
                stack.append((m.group(1), depth))
            where.append(mod + tuple(s for s, _ in stack))
            depth += line.count("{") - line.count("}")
            while stack and depth <= stack[-1][1]:
                stack.pop()

        def resolve(segments, here):
            head, rest = segments[0], segments[1:]
            if head == "crate":
                base = ()
            elif head == "self":
                base = here
            elif head == "super":
                base = here
                while rest and rest[0] == "super":
                    base, rest = base[:-1], rest[1:]
                base = base[:-1]
            elif head in children.get(here, ()):
                base, rest = here, segments
            else:
                return None
            return target(list(base) + list(rest))

        def add(lineno, segments):
            here = where[min(lineno, len(where) - 1)]
            to = resolve(segments, here)
            if to is None or to == mod or mod[: len(to)] == to:
                return
            edges[(mod, to)].append(lineno + 1)

        for m in USE.finditer(text):
            lineno = text.count("\n", 0, m.start())
            for p in expand(m.group(1)):
                add(lineno, [s for s in p.split("::") if s and s != "*"])
        for no, line in enumerate(lines):
            if re.match(r"\s*(pub(\([^)]*\))?\s+)?use\b", line):
                continue
            for m in PATH.finditer(line):
                add(no, [m.group(1)] + m.group(2).split("::")[1:])
            for m in IDENT_PATH.finditer(line):
                if m.group(1) in children.get(where[no], ()):
                    add(no, [m.group(1)] + m.group(2).split("::")[1:])

    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    cycles = sccs(files.keys(), graph)
    name = lambda m: os.path.relpath(files[m], crate)
    for comp in cycles:
        print(f"{crate}: import cycle between {', '.join(sorted(name(m) for m in comp))}:")
        for (a, b), nos in sorted(edges.items()):
            if a in comp and b in comp:
                print(f"  {name(a)} -> {name(b)} (line {', '.join(map(str, sorted(set(nos))))})")
    return not cycles


def sccs(nodes, graph):
    """Tarjan: the strongly connected components of two nodes or more."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    crates = sys.argv[1:] or sorted(
        os.path.join("crates", d)
        for d in os.listdir(os.path.join(root, "crates"))
        if os.path.isdir(os.path.join(root, "crates", d, "src"))
    )
    os.chdir(root)
    ok = all([check(c) for c in crates])
    if ok:
        print(f"no import cycle between the files of {len(crates)} crates")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
