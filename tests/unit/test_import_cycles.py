# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""No module of rdt_virt or nova_plugin imports itself back through others.

The graph is read from the source with :mod:`ast`, so an import inside a
function counts as much as one at the top: either way the two modules can
no longer be understood, tested or moved one without the other.
"""

import ast
import os

from tests import base

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PACKAGES = ('rdt_virt', 'nova_plugin')


def modules(root):
    """``{dotted name: path}`` of every module under *root*."""
    out = {}
    for directory, _dirs, files in os.walk(root):
        rel = os.path.relpath(directory, os.path.dirname(root))
        for name in files:
            if not name.endswith('.py'):
                continue
            parts = rel.split(os.sep)
            if name != '__init__.py':
                parts.append(name[:-3])
            out['.'.join(parts)] = os.path.join(directory, name)
    return out


def imports(source, known):
    """The modules of *known* that *source* imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif (isinstance(node, ast.ImportFrom) and node.module and
                not node.level):
            for alias in node.names:
                full = '%s.%s' % (node.module, alias.name)
                if full in known:
                    found.add(full)
                elif node.module in known:
                    found.add(node.module)
    return found


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                dep = stack.pop()
                on_stack.discard(dep)
                component.append(dep)
                if dep == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


class ImportCyclesTest(base.TestCase):

    def test_finds_a_cycle_through_a_function_level_import(self):
        known = {'p.a', 'p.b', 'p.c'}
        graph = {
            'p.a': imports('from p import b\n', known),
            'p.b': imports('def f():\n    from p import a\n', known),
            'p.c': imports('import p.a\n', known),
        }
        self.assertEqual([['p.a', 'p.b']], cycles(graph))

    def test_no_import_cycle(self):
        known = {}
        for package in PACKAGES:
            known.update(modules(os.path.join(SOURCE, package)))
        self.assertIn('rdt_virt.sandbox.chart', known)
        self.assertIn('nova_plugin.scheduler.state', known)
        graph = {}
        for name, path in known.items():
            with open(path) as f:
                graph[name] = imports(f.read(), known) - {name}
        self.assertEqual([], cycles(graph))
