#!/usr/bin/env python3
"""Tests of scripts/check-deps.py on small crates written here: a cycle is found, a facade's
re-export or a string that looks like a path is not one, a test module's `super::` is its file."""
import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("check_deps", os.path.join(HERE, "check-deps.py"))
check_deps = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(check_deps)


def cycles_of(files):
    """Writes `files` (path -> text) as a crate under a crates/ folder; its cycles as sets of
    file names."""
    with tempfile.TemporaryDirectory() as root:
        check_deps.ROOT = root
        for path, text in files.items():
            full = os.path.join(root, "crates", "demo", "src", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as fh:
                fh.write(text)
        crate = check_deps.Crate("demo", os.path.join(root, "crates", "demo", "src", "lib.rs"))
        crate.scan()
        return [{os.path.basename(f) for f in comp} for comp in check_deps.sccs(crate.edges)]


class CheckDeps(unittest.TestCase):
    def test_two_files_naming_each_other_are_a_cycle(self):
        found = cycles_of({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B(crate::a::A);\n",
        })
        self.assertEqual(found, [{"a.rs", "b.rs"}])

    def test_a_facade_re_export_is_followed_to_the_defining_file(self):
        found = cycles_of({
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod x;\nmod y;\npub use x::X;\npub use y::Y;\n",
            "m/x.rs": "pub struct X;\n",
            "m/y.rs": "use super::X;\npub struct Y(X);\n",
        })
        self.assertEqual(found, [])

    def test_a_parent_defining_what_its_child_uses_and_using_the_child_is_a_cycle(self):
        found = cycles_of({
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod x;\nuse x::X;\npub struct P(X);\n",
            "m/x.rs": "use super::P;\npub struct X;\nfn f(_: P) {}\n",
        })
        self.assertEqual(found, [{"mod.rs", "x.rs"}])

    def test_paths_in_strings_and_comments_are_no_edges(self):
        found = cycles_of({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": 'const S: &str = "crate::b::B // x";\n// use crate::b::B;\npub struct A;\n',
            "b.rs": "pub struct B(crate::a::A);\n",
        })
        self.assertEqual(found, [])

    def test_super_in_an_inline_test_module_is_the_file_itself(self):
        found = cycles_of({
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod x;\npub use x::X;\npub struct P;\n",
            "m/x.rs": "pub struct X;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        })
        self.assertEqual(found, [])

    def test_a_path_module_is_read(self):
        found = cycles_of({
            "lib.rs": "mod a;\n",
            "a.rs": '#[cfg(test)]\n#[path = "a_tests.rs"]\nmod a_tests;\npub struct A;\n',
            "a_tests.rs": "use crate::a::A;\n",
        })
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
