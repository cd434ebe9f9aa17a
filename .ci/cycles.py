#!/usr/bin/env python3
"""Finds cycles between the top-level modules of each crate: `python3 .ci/cycles.py`
(or give the crates' src folders). Exits 1, naming each cycle and its edges, if one
is found.

A module's edges are the other top-level modules of its crate that it names as
`crate::name` or in `use crate::{...}` (its tests, `#[cfg(test)] mod tests { … }` and
files named tests.rs, left out: a test may reach anywhere; comments too). docs/layout.md draws the graph this keeps acyclic.
"""
import glob
import os
import re
import sys
def strip_tests(s):
    """The source without its `#[cfg(test)] mod tests { ... }` blocks (braces counted)."""
    while True:
        m=re.search(r'#\[cfg\(test\)\]\s*mod \w+\s*\{', s)
        if not m:
            return s
        depth=0
        for i in range(m.end()-1, len(s)):
            if s[i]=='{': depth+=1
            elif s[i]=='}':
                depth-=1
                if depth==0:
                    break
        s=s[:m.start()]+s[i+1:]

def graph(src):
    g={}
    mods=set()
    for f in os.listdir(src):
        if f.endswith('.rs') and f not in ('lib.rs','main.rs'): mods.add(f[:-3])
        elif os.path.isdir(os.path.join(src,f)): mods.add(f)
    for dp,_,fs in os.walk(src):
        for f in fs:
            # A test module of its own file (`#[cfg(test)] mod tests;`) is a test too.
            if not f.endswith('.rs') or f == 'tests.rs': continue
            p=os.path.join(dp,f); rel=os.path.relpath(p,src)
            top=rel.split('/')[0]; top=top[:-3] if top.endswith('.rs') else top
            if top not in mods: continue
            s=open(p).read()
            s=strip_tests(s)
            s=re.sub(r'//.*','',s)
            deps=set(re.findall(r'crate::(\w+)',s))
            for m in re.finditer(r'use crate::\{([^}]*)\}',s):
                deps|=set(re.findall(r'(?:^|,)\s*(\w+)',m.group(1)))
            g.setdefault(top,set()).update(d for d in deps if d in mods and d!=top)
    return g
def sccs(g):
    idx={};low={};st=[];on=set();out=[];i=[0]
    def sc(v):
        idx[v]=low[v]=i[0];i[0]+=1;st.append(v);on.add(v)
        for w in g.get(v,()):
            if w not in idx: sc(w);low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            c=[]
            while True:
                w=st.pop();on.discard(w);c.append(w)
                if w==v: break
            if len(c)>1: out.append(sorted(c))
    sys.setrecursionlimit(10000)
    for v in list(g): 
        if v not in idx: sc(v)
    return out
roots = sys.argv[1:] or sorted(glob.glob(os.path.join(os.path.dirname(__file__), '..', 'crates', '*', 'src')))
found = 0
for src in roots:
    g = graph(src)
    for c in sccs(g):
        found += 1
        print(f"{os.path.normpath(src)}: a cycle between {', '.join(c)}")
        for a in c:
            print('   ', a, '->', ' '.join(sorted(d for d in g[a] if d in c)))
if found:
    sys.exit(1)
print(f"no cycle between the top-level modules of {len(roots)} crates")
