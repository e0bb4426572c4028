#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""README.md's layout table matches the source tree. The rule, which the
README states under the table:
- every top-level folder with C sources (.c, .h) or a meson.build anywhere
  inside it has a row whose path is the folder (`name/`) or lies inside it
  (`include/aql/`);
- every folder one level down with C sources or a meson.build of its own
  has a row (`aql/kfd/`) or is named in backticks (`kfd_emu/`) in the row
  of its parent;
- every row's path exists.
Hidden folders and build trees (those with meson-private/) are not source.
Adding a folder (examples/, say) means adding a row for it."""
import argparse
import os
import re
import sys

SOURCE = re.compile(r'\.(c|h)$|^meson\.build$')


def has_source(files):
    return any(SOURCE.search(f) for f in files)


def tree(root):
    """Top-level source folders, and second-level ones with sources of their own."""
    top, second = set(), set()
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name.startswith('.') or not os.path.isdir(path) or \
                os.path.isdir(os.path.join(path, 'meson-private')):
            continue
        for dirpath, dirnames, files in os.walk(path):
            dirnames[:] = [d for d in dirnames if not d.startswith('.')]
            rel = os.path.relpath(dirpath, root).split(os.sep)
            if has_source(files):
                top.add(name)
                if len(rel) == 2:
                    second.add('/'.join(rel))
    return top, second


def table(readme):
    text = open(readme).read()
    m = re.search(r'^## Layout\n(.*?)(?=^## |\Z)', text, flags=re.M | re.S)
    if not m:
        return None
    rows = {}
    for line in m.group(1).splitlines():
        cells = re.match(r'^\|\s*`([^`]+)`\s*\|(.*)\|\s*$', line)
        if cells:
            rows[cells.group(1).rstrip('/')] = cells.group(2)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True, help='the source tree')
    args = ap.parse_args()
    rows = table(os.path.join(args.root, 'README.md'))
    if not rows:
        print('FAIL: README.md has no "## Layout" table')
        return 1
    top, second = tree(args.root)
    errors = []
    for name in sorted(top):
        if not any(r == name or r.startswith(name + '/') for r in rows):
            errors.append(f'top-level source folder {name}/ has no row')
    for sub in sorted(second):
        parent, child = sub.split('/')
        named = f'`{child}/`' in rows.get(parent, '')
        if sub not in rows and not named:
            errors.append(f'{sub}/ has no row and its parent\'s row does not name `{child}/`')
    for path in sorted(rows):
        if not os.path.isdir(os.path.join(args.root, path)):
            errors.append(f'row {path}/ names no folder of the tree')
    for e in errors:
        print('FAIL:', e)
    print(f'{len(rows)} rows, {len(top)} top-level and {len(second)} second-level source folders')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
