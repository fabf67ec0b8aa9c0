#!/usr/bin/env python3
"""Checks the workspace's shape: no import cycle between the files of any crate, and no crate
dependency edge outside the allowed graph (scripts/crate-graph.toml).

A file's edges are the modules it names through `use` (`crate::…`, `super::…`, `self::…` or a
child module's name) and inline paths of the same kinds. A `pub use` re-export is a module's
surface, not a dependency of its code: it is not an edge, and a name reached through it is
followed to the file that defines it, so a facade module does not close a cycle. Inside an
inline `mod tests { … }`, `super::` is the file itself. Exits 1 naming every cycle (its files) and every forbidden edge.

Usage: scripts/check-deps.py [--graph CRATE]   (--graph prints one crate's file edges)
"""
import json
import os
import re
import subprocess
import sys
import tomllib

# A name a module re-exports from another crate: naming it through the module is no edge.
EXTERNAL = ["<external>"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
CHILD_PATH = re.compile(r"(?<![A-Za-z0-9_:])[a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+")
PATH_CHARS = re.compile(r"(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+")
MOD_DECL = re.compile(r"(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;")


VISIBILITY = re.compile(r"pub\s*\(\s*in\s+[^)]*\)")
INLINE_MOD = re.compile(r"\bmod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{")


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def lex(src, keep_strings):
    """Comments become a space; string literals become `""` unless `keep_strings`. One pass,
    so `//` inside a string and quotes inside a comment are read as what they are."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = len(re.match(r'r(#*)"', src[i:]).group(1))
            end = src.find('"' + "#" * hashes, i + 2 + hashes)
            end = n if end < 0 else end + 1 + hashes
            out.append(src[i:end] if keep_strings else '""')
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1] if keep_strings else '""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.[^']*|[^'\\])'", src[i:i + 12]):
            m = re.match(r"'(\\.[^']*|[^'\\])'", src[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip(src):
    src = lex(src, keep_strings=False)
    src = VISIBILITY.sub("pub", src)
    return inline_modules_resolved(src)


def inline_modules_resolved(src):
    """Inside an inline `mod name { … }` (a test module), `super::` names the file's own
    module: rewritten to `self::` so it resolves to the file, not to its parent."""
    out, pos = [], 0
    for m in INLINE_MOD.finditer(src):
        if m.start() < pos:
            continue
        depth, end = 0, len(src)
        for i in range(m.end() - 1, len(src)):
            if src[i] == "{":
                depth += 1
            elif src[i] == "}":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
        out.append(src[pos:m.end()])
        out.append(re.sub(r"\bsuper::", "self::", src[m.end():end]))
        pos = end
    out.append(src[pos:])
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> [[a,b],[a,c,d],[a,c,e]] (renames and globs reduced to paths)."""
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, t):
        depth, start, parts = 0, 0, []
        if "{" not in t:
            names = [s for s in t.split("::") if s]
            out.append(prefix + [n for n in names if n != "*"])
            return
        head, _, rest = t.partition("{")
        body = rest[: rest.rfind("}")]
        base = prefix + [s for s in head.split("::") if s]
        for i, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(body[start:i])
                start = i + 1
        parts.append(body[start:])
        for p in parts:
            if p == "self":
                out.append(base)
            elif p:
                walk(base, p)

    walk([], tree)
    return out


class Crate:
    def __init__(self, name, src_root):
        self.name = name
        self.files = {}  # module path tuple -> file
        self.reexports = {}  # module tuple -> {name: target path list}
        self.edges = {}  # file -> set(file)
        self._collect(src_root, ())

    def _collect(self, path, modpath):
        if path in self.files.values():
            return
        self.files[modpath] = path
        src = lex(read(path), keep_strings=True)
        base = os.path.dirname(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        child_dir = base if stem in ("lib", "main", "mod") else os.path.join(base, stem)
        for m in MOD_DECL.finditer(src):
            explicit, name = m.group(1), m.group(2)
            if explicit:
                child = os.path.normpath(os.path.join(base, explicit))
            else:
                child = os.path.join(child_dir, name + ".rs")
                if not os.path.exists(child):
                    child = os.path.join(child_dir, name, "mod.rs")
            if os.path.exists(child) and child.startswith(ROOT + "/crates"):
                self._collect(child, modpath + (name,))

    def module_of(self, path):
        for mod, f in self.files.items():
            if f == path:
                return mod
        raise KeyError(path)

    def absolute(self, mod, segs):
        """A path as written in module `mod` -> absolute segments, or None if not crate-local."""
        if not segs:
            return None
        if segs[0] == "crate":
            return list(segs[1:])
        cur = list(mod)
        i = 0
        if segs[0] == "self":
            i = 1
        while i < len(segs) and segs[i] == "super":
            cur = cur[:-1]
            i += 1
        if i == 0:
            return None
        return cur + list(segs[i:])

    def resolve(self, segs, depth=0):
        """Absolute segments -> the file defining what they name."""
        best = ()
        for n in range(len(segs), -1, -1):
            if tuple(segs[:n]) in self.files:
                best = tuple(segs[:n])
                break
        rest = segs[len(best):]
        if rest and depth < 8:
            target = self.reexports.get(best, {}).get(rest[0])
            if target is EXTERNAL:
                return None
            if target is not None:
                return self.resolve(target + rest[1:], depth + 1)
        return self.files[best]

    def scan(self):
        srcs = {mod: strip(read(f)) for mod, f in self.files.items()}
        for mod, src in srcs.items():
            table = {}
            for m in USE.finditer(src):
                if not m.group(1):
                    continue
                for p in expand_use_tree(m.group(2)):
                    ab = self.absolute(mod, p)
                    if ab is None and p and (mod + (p[0],)) in self.files:
                        ab = list(mod) + p
                    if ab:
                        table[p[-1]] = ab
                    elif p and p[-1] not in table:
                        table[p[-1]] = EXTERNAL
            self.reexports[mod] = table
        for mod, src in srcs.items():
            me = self.files[mod]
            deps = set()
            paths = []
            for m in USE.finditer(src):
                if not m.group(1):
                    paths += expand_use_tree(m.group(2))
            body = USE.sub(" ", src)
            paths += [p.group(0).split("::") for p in PATH_CHARS.finditer(body)]
            paths += [p.group(0).split("::") for p in CHILD_PATH.finditer(body)]
            for p in paths:
                ab = self.absolute(mod, p)
                if ab is None and p and (mod + (p[0],)) in self.files:
                    ab = list(mod) + p
                if ab is None:
                    continue
                target = self.resolve(ab)
                if target is not None and target != me:
                    deps.add(target)
            self.edges[me] = deps


def sccs(edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def workspace():
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"], cwd=ROOT))
    return [p for p in meta["packages"]]


def check_graph(packages, failures):
    path = os.path.join(ROOT, "scripts", "crate-graph.toml")
    with open(path, "rb") as fh:
        allowed = tomllib.load(fh)["allowed"]
    names = {p["name"] for p in packages}
    for p in packages:
        local = sorted({d["name"] for d in p["dependencies"]
                        if d["name"] in names and d.get("kind") in (None, "build")})
        if p["name"] not in allowed:
            failures.append(f"crate {p['name']} is not in scripts/crate-graph.toml")
            continue
        for d in local:
            if d not in allowed[p["name"]]:
                failures.append(f"forbidden dependency edge: {p['name']} -> {d} "
                                f"(allowed: {', '.join(allowed[p['name']]) or 'none'})")


def main():
    packages = workspace()
    failures = []
    check_graph(packages, failures)
    want = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--graph" else None
    for p in packages:
        for t in p["targets"]:
            if not set(t["kind"]) & {"lib", "bin"}:
                continue
            crate = Crate(f"{p['name']}::{t['name']}", t["src_path"])
            crate.scan()
            if want and p["name"] == want:
                for f, ds in sorted(crate.edges.items()):
                    for d in sorted(ds):
                        print(os.path.relpath(f, ROOT), "->", os.path.relpath(d, ROOT))
            for comp in sccs(crate.edges):
                files = ", ".join(os.path.relpath(f, ROOT) for f in comp)
                failures.append(f"import cycle in {crate.name} ({len(comp)} files): {files}")
    for f in failures:
        print(f, file=sys.stderr)
    if failures:
        sys.exit(1)
    print("check-deps: no import cycles, every crate edge allowed")


if __name__ == "__main__":
    main()
