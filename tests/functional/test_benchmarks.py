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

"""The agent benchmarks measure what they claim to, with a few instances.

They mount the emulator (root, /dev/fuse). No timing is asserted: the
in-memory figures must come from an agent that reads the in-memory copy
and nothing through FUSE, the sample must read every counter of every
monitored instance and compute rates, and the targets printed must be the
documented ones (``tests/unit/test_benchmarks.py`` checks those against
the docs). ``agent_fast_path.py`` needs KVM and libvirt as well and is
not run here.
"""

import contextlib
import importlib
import io
import logging
import os
import sys

from tests import base
from tests.unit import test_benchmarks as unit

sys.path.insert(0, unit.BENCHMARKS)


class AgentBenchmarkTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.require_fuse()
        self.common = importlib.import_module('agent_common')
        # EmulatedHost quiets logging process-wide; give it back.
        self.addCleanup(logging.disable, logging.NOTSET)

    def host(self, instances=6):
        env = self.common.EmulatedHost(rotation_interval=3600.0)
        self.addCleanup(env.close)
        for i in range(instances):
            env.boot(self.common.shared(10 * (i % 7 + 1)), vcpus=2)
        env.agent.tick()
        env.agent.tick()
        return env

    def test_in_memory_tick_reads_no_file_through_fuse(self):
        tick = unit.load('agent_tick')
        env = self.host()
        agent, stats = tick.frozen_ticks(env, 2)
        copy = os.path.join(env.dir, 'frozen')
        self.assertEqual(copy, agent.resctrl.root)
        self.assertEqual([0, 0], [s.writes for s in stats])
        reads, proc = tick.count_reads(agent)
        self.assertTrue(reads)
        self.assertEqual([], [p for p in reads if not p.startswith(copy)])
        # One thread listing per instance, and the FUSE agent reads FUSE.
        self.assertEqual(6, len(proc))
        fuse_reads, _ = tick.count_reads(env.agent)
        self.assertTrue(all(p.startswith(env.mount) for p in fuse_reads))

    def test_tick_prints_the_documented_targets(self):
        tick = unit.load('agent_tick')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            tick.main(['--instances', '6', '--vcpus', '2', '--ticks', '2',
                       '--periods', '3'])
        text = out.getvalue()
        self.assertEqual(sorted(unit.source_targets('agent_tick')),
                         sorted(unit.printed_targets(text)))
        self.assertIn('of which through FUSE: 0', text)
        self.assertIn('thread listings: 6 for 6 instances', text)

    def test_sample_reads_every_counter_of_the_copy(self):
        sample = unit.load('agent_sample')
        env = self.host()
        copy = self.common.copy_tree(env, os.path.join(env.dir, 'memory'),
                                     mon_data=True)
        agent = self.common.agent_on(env, copy)
        agent.tick()
        cpu, paths, doc = sample.measure(agent, 3, copy)
        self.assertEqual(3, len(cpu))
        caps = agent.caps.monitor
        monitored = [u for u, p in agent.placements.items() if p.counters]
        self.assertEqual(6, len(monitored))
        counters = [p for p in paths if '/mon_data/' in p]
        self.assertEqual(
            len(monitored) * len(caps.domain_ids) * len(caps.features),
            len(counters))
        self.assertEqual([], [p for p in paths if p.startswith(env.mount)])
        self.assertTrue(all(p.startswith(copy) for p in counters))
        # Counters grew between samples: every monitored instance has a
        # rate, so the rates were computed, not skipped.
        self.assertEqual(sorted(monitored), sorted(
            u for u, inst in doc['instances'].items()
            if inst.get('mbm_total_bps')))

    def test_sample_prints_the_documented_target(self):
        sample = unit.load('agent_sample')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            sample.main(['--instances', '4', '--vcpus', '2', '--samples',
                         '2'])
        self.assertEqual(unit.source_targets('agent_sample'),
                         unit.printed_targets(out.getvalue()))
        self.assertIn('through FUSE: 0', out.getvalue())
