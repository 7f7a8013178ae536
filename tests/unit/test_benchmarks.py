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

"""The benchmarks measure what they claim to, in a run of a few hosts.

No timing is asserted: these tests check that each side of a ratio ran the
same work, and that the targets a benchmark prints are the ones the
contributor guide states. The agent benchmarks need root and FUSE; their
smoke tests are in ``tests/functional/test_benchmarks.py``.
"""

import ast
import contextlib
import importlib.util
import io
import os
import re

from tests import base

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BENCHMARKS = os.path.join(TOP, 'benchmarks')
DOC = os.path.join(TOP, 'doc', 'source', 'contributor', 'benchmarks.rst')


def load(name):
    """A benchmark script as a module (``benchmarks/`` is no package)."""
    spec = importlib.util.spec_from_file_location(
        'bench_' + name, os.path.join(BENCHMARKS, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def doc_text():
    """The benchmarks page with its whitespace folded."""
    with open(DOC) as f:
        return ' '.join(f.read().split())


def printed_targets(out):
    """The target texts of a run's ``target: TEXT: verdict`` lines."""
    return [m.group(1) for m in re.finditer(
        r'^target: (.*): (?:met|NOT met)', out, re.M)]


def source_targets(name):
    """Every ``*_TARGET_TEXT`` a benchmark script defines.

    Read from the source, not imported: the agent benchmarks import what
    only their own environment has.
    """
    with open(os.path.join(BENCHMARKS, name + '.py')) as f:
        tree = ast.parse(f.read())
    return sorted(ast.literal_eval(node.value) for node in tree.body
                  if isinstance(node, ast.Assign) and any(
                      getattr(t, 'id', '').endswith('_TARGET_TEXT')
                      for t in node.targets))


class SchedulerBenchmarkTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.bench = load('scheduler')

    def test_both_sides_of_the_ratio_ran_the_same_requests(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertIn(self.bench.main(
                ['--hosts', '12', '--requests', '13', '--rounds', '2']),
                (0, 1))
        ran = self.bench.LAST_RUN
        rdt, base_set = ran[self.bench.RDT_SET], ran[self.bench.BASE_SET]
        self.assertEqual(2, len(rdt))
        self.assertEqual(base_set, rdt)
        self.assertEqual(13, len(set(rdt[0][0])))
        self.assertEqual(12, rdt[0][1])
        # Every set saw the same requests and hosts, the no-op floor too.
        for name, rounds in ran.items():
            self.assertEqual(rdt[0], rounds[0], name)
        self.assertIn(self.bench.NULL_SET, ran)
        # Half of the requests have RDT extra specs: the filter works.
        self.assertIn('(53% with RDT extra specs)', out.getvalue())
        self.assertEqual([self.bench.RATIO_TARGET_TEXT],
                         printed_targets(out.getvalue()))

    def test_the_null_pair_does_nothing(self):
        hosts = ['a', 'b', 'c']
        self.assertEqual(hosts, self.bench.NullFilter().filter_all(hosts,
                                                                   None))
        self.assertEqual([0.0] * 3, self.bench.NullWeigher().weigh_objects(
            hosts, None))


class ExporterCardinalityBenchmarkTest(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            self.skipTest('prometheus-client is not installed')
        self.bench = load('exporter_cardinality')

    def run_main(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(0, self.bench.main(list(args)))
        return out.getvalue()

    def test_the_label_adds_bytes_not_series(self):
        for extra in ((), ('--instance-names', '--energy')):
            out = self.run_main('--instances', '12', '--projects', '3',
                                *extra)
            ran = self.bench.LAST_RUN
            without, with_ = ran[self.bench.WITHOUT], ran[self.bench.WITH]
            self.assertEqual(without['keys'], with_['keys'])
            self.assertEqual(without['series'], with_['series'])
            self.assertGreater(with_['instance_series'], 12 * 4)
            # ',project="<32 hex digits>"' on each per-instance series.
            self.assertEqual(with_['instance_series'] * 43,
                             with_['bytes'] - without['bytes'])
            self.assertIn('same series apart from the label: yes', out)
            self.assertIn('12 instances, 3 projects', out)

    def test_the_host_is_the_one_described(self):
        doc = self.bench.make_host(200, 20)
        insts = doc['instances']
        self.assertEqual(200, len(insts))
        self.assertEqual(20, len({i['project_id'] for i in insts.values()}))
        self.assertEqual({'high', 'normal', 'low'},
                         {i['priority'] for i in insts.values()})
        keys = set().union(*(i['policy'] for i in insts.values()))
        self.assertEqual({'mem_bw', 'mem_bw_requested', 'mem_bw_mbps',
                          'cache_l3', 'cache_l3_requested'}, keys)
        self.assertTrue(any(i['level'] for i in insts.values()))
        # The reference host's RMID budget: the others rotated out.
        self.assertEqual(200 - self.bench.MON_BUDGET, len(
            [i for i in insts.values() if i['mbm_total_bps'] is None]))


class TargetsTest(base.TestCase):
    """The targets each benchmark prints are the ones the docs state."""

    def test_every_target_is_in_the_docs(self):
        text = doc_text()
        found = {}
        for name in ('scheduler', 'agent_tick', 'agent_sample',
                     'agent_fast_path', 'agent_admission', 'agent_rates'):
            found[name] = source_targets(name)
            self.assertTrue(found[name], name)
            for target in found[name]:
                self.assertIn('``%s``' % target, text, name)
        self.assertEqual(2, len(found['agent_tick']))
        self.assertEqual(2, len(found['agent_rates']))

    def test_printed_target_lines_are_read(self):
        out = 'x\ntarget: a <= 1 ms: met (ratio 0.5)\ntarget: b: NOT met\n'
        self.assertEqual(['a <= 1 ms', 'b'], printed_targets(out))
