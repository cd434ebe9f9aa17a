#!/usr/bin/env python3
"""Finds cycles between the top-level modules of each crate: `python3 .ci/cycles.py`
(or give the crates' src folders). Exits 1, naming each cycle and its edges, if one
is found.

A module's edges are the other top-level modules of its crate that its files name:
`crate::name…` paths (with `use crate::{a, b::{c, d}}` groups read whole, nested
braces too), `super::…` paths that climb to the crate's root (`super::name` in a
top-level file, `super::super::name` one folder down), and names the crate root
imports (`crate::Error` when lib.rs says `pub use error::Error`; with `use super::*`
at the root, every name the root imported from a module that the file mentions).
Comments, string and char literals are dropped first, then tests: `#[cfg(test)] mod
… { … }` blocks and files named tests.rs (a test may reach anywhere). What it cannot
see: a method called on a root type whose `impl` block lives in another module (that
needs the types; the compiler's own graph). docs/layout.md draws the graph this keeps
acyclic.
"""
import glob
import os
import re
import sys

# A Rust token stream is not parsed here, only cleaned: comments, then literals, so a
# brace or a `crate::` inside a string or a comment counts for nothing.
LEXEME = re.compile(
    r'//[^\n]*'                       # line comment
    r'|/\*(?:[^*]|\*(?!/))*\*/'       # block comment (not nested: none in this tree)
    r'|b?r(#*)"(?:.|\n)*?"\1'         # raw string
    r'|b?"(?:\\.|[^"\\])*"'           # string
    r"|b?'(?:\\.|[^'\\])'"            # char (a lifetime `'a` has no closing quote)
    , re.S)


def clean(source):
    """The source without comments and with every literal emptied."""
    def blank(m):
        text = m.group(0)
        if text.startswith('//') or text.startswith('/*'):
            return ' '
        return '""'
    return LEXEME.sub(blank, source)


def strip_tests(s):
    """The source without its `#[cfg(test)] mod name { … }` blocks (braces counted)."""
    while True:
        m = re.search(r'#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod \w+\s*\{', s)
        if not m:
            return s
        depth = 0
        end = len(s)
        for i in range(m.end() - 1, len(s)):
            if s[i] == '{':
                depth += 1
            elif s[i] == '}':
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
        s = s[:m.start()] + s[end:]


def group_heads(body):
    """The first segment of each path in a `{…}` use group, nested groups skipped."""
    heads, depth, item = [], 0, ''
    for ch in body + ',':
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        elif depth == 0 and ch == ',':
            m = re.match(r'\s*(\w+)', item)
            if m:
                heads.append(m.group(1))
            item = ''
        elif depth == 0:
            item += ch
    return heads


def use_groups(s, prefix):
    """The bodies of every `prefix{…}` group (balanced braces)."""
    for m in re.finditer(re.escape(prefix) + r'\{', s):
        depth = 0
        for i in range(m.end() - 1, len(s)):
            if s[i] == '{':
                depth += 1
            elif s[i] == '}':
                depth -= 1
                if depth == 0:
                    yield s[m.end():i]
                    break


def root_imports(root_file, mods):
    """Names the crate root imports from its own modules (`use`, `pub use`,
    `pub(crate) use`), each to the module it comes from."""
    if not os.path.exists(root_file):
        return {}
    s = clean(open(root_file).read())
    names = {}
    for m in re.finditer(r'(?:^|[;}\s])use (?:crate::|self::)?(\w+)::(\w+|\{)', s):
        module = m.group(1)
        if module not in mods:
            continue
        if m.group(2) == '{':
            for body in use_groups(s[m.start():], f'{module}::'):
                for name in group_heads(body):
                    names[name] = module
                break
        else:
            names[m.group(2)] = module
    return names


def module_path(rel):
    """`a/b.rs` is a::b, `a/mod.rs` is a, `a.rs` is a."""
    parts = rel[:-3].split('/')
    if parts[-1] == 'mod':
        parts.pop()
    return parts


def graph(src):
    g = {}
    mods = set()
    for f in os.listdir(src):
        if f.endswith('.rs') and f not in ('lib.rs', 'main.rs'):
            mods.add(f[:-3])
        elif os.path.isdir(os.path.join(src, f)):
            mods.add(f)
    root_names = {}
    for root in ('lib.rs', 'main.rs'):
        root_names.update(root_imports(os.path.join(src, root), mods))
    for dp, _, fs in os.walk(src):
        for f in fs:
            # A test module of its own file (`#[cfg(test)] mod tests;`) is a test too.
            if not f.endswith('.rs') or f == 'tests.rs':
                continue
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, src)
            path = module_path(rel)
            top = path[0]
            if top not in mods:
                continue
            s = strip_tests(clean(open(p).read()))
            names = set(re.findall(r'\bcrate::(\w+)', s))
            for body in use_groups(s, 'crate::'):
                names |= set(group_heads(body))
            # `super::` climbs one module per word; only a climb to the root leaves `top`.
            for m in re.finditer(r'\b((?:super::)+)(\w+|\*|\{)', s):
                climbs = m.group(1).count('super::')
                if climbs < len(path):
                    continue
                if m.group(2) == '*':
                    # The root's own items are no module; what it imported from a
                    # module is an edge where this file names it.
                    names |= {n for n in root_names if re.search(rf'\b{n}\b', s)}
                elif m.group(2) == '{':
                    for body in use_groups(s[m.start():], m.group(1)):
                        names |= set(group_heads(body))
                        break
                else:
                    names.add(m.group(2))
            deps = {n if n in mods else root_names.get(n) for n in names}
            g.setdefault(top, set()).update(d for d in deps if d and d != top)
    return g


def sccs(g):
    """Tarjan's strongly connected components of more than one module."""
    idx, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        idx[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in idx:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            c = []
            while True:
                w = stack.pop()
                on.discard(w)
                c.append(w)
                if w == v:
                    break
            if len(c) > 1:
                out.append(sorted(c))
    sys.setrecursionlimit(10000)
    for v in list(g):
        if v not in idx:
            visit(v)
    return out


here = os.path.join(os.path.dirname(__file__), '..')
# The root package (the command and its library) and each crate under crates/.
roots = sys.argv[1:] or [os.path.join(here, 'src')] + sorted(glob.glob(os.path.join(here, 'crates', '*', 'src')))
found = 0
edges = 0
for src in roots:
    g = graph(src)
    edges += sum(len(d) for d in g.values())
    for c in sccs(g):
        found += 1
        print(f"{os.path.normpath(src)}: a cycle between {', '.join(c)}")
        for a in c:
            print('   ', a, '->', ' '.join(sorted(d for d in g[a] if d in c)))
if found:
    sys.exit(1)
print(f"no cycle between the top-level modules of {len(roots)} crates ({edges} edges read)")
