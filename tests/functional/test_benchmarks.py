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
monitored instance and compute rates, every rate must be compared with
the truth injected into the group it was read from, and the targets
printed must be the documented ones (``tests/unit/test_benchmarks.py``
checks those against the docs). ``agent_fast_path.py`` and the
per-instance half of ``agent_admission.py`` start their own sandbox
(real libvirtd and KVM guests), as CI can.
"""

import contextlib
import copy
import errno
import importlib
import io
import logging
import os
import sys
from unittest import mock

from rdt_virt import privsep
from tests import base
from tests.functional import emulated
from tests.unit import test_benchmarks as unit

sys.path.insert(0, unit.BENCHMARKS)


class AgentBenchmarkBase(base.TestCase):
    """The emulator's prerequisites, and a host of a few instances."""

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


class AgentBenchmarkTest(AgentBenchmarkBase):

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


class RatesBenchmarkTest(AgentBenchmarkBase):

    def test_every_rate_is_compared_with_its_groups_truth(self):
        rates = unit.load('agent_rates')
        out = io.StringIO()
        # Three instances on a budget of two monitoring groups: the
        # agent rotates, and a quarter of the budget (one group) changes
        # at a time, so the other has a rate from the second sample on.
        with contextlib.redirect_stdout(out):
            self.assertIn(rates.main(
                ['--instances', '3', '--rmid-budget', '2', '--rotation',
                 '2', '--seconds', '0', '--samples', '3']), (0, 1))
        text = out.getvalue()
        run = rates.LAST_RUN
        readings = run['readings']
        self.assertTrue(readings)
        # The truths differ by more than the target from one instance to
        # the next: a rate compared with another group's truth would show.
        truths = sorted({want for _u, _p, want in run['injected'].values()})
        self.assertEqual(3, len(truths))
        for low, high in zip(truths, truths[1:]):
            self.assertGreater((high - low) / high, rates.RATE_TARGET)
        for reading in readings:
            self.assert_compared_with_its_truth(run['injected'], reading)
            # And the rate is nearer its own truth than any other (a third
            # apart at least): what was injected is what it is held to.
            self.assertEqual(reading['want'], min(
                truths, key=lambda t: abs(t - reading['got'])), reading)
        wrong = dict(readings[0], owner='another instance')
        self.assertRaises(AssertionError, self.assert_compared_with_its_truth,
                          run['injected'], wrong)

        # Coverage and the count of readings are made of the same samples.
        samples = run['samples']
        self.assertEqual(3, len(samples))
        self.assertEqual(len(samples), len(run['groups']))
        for sample, groups in zip(samples, run['groups']):
            self.assertEqual(3, sample['monitored'])
            self.assertEqual(3, sample['with_value'] + sample['without_value'])
            # The agent's coverage counts any value, the cache occupancy
            # too, which a group has from its first reading; a rate needs
            # two readings of the same group.
            self.assertEqual(round(sample['with_any'] / 3.0, 4),
                             sample['coverage'])
            self.assertLessEqual(sample['with_value'], sample['with_any'])
            self.assertLessEqual(groups, 2)
            self.assertEqual(round(groups / 3.0, 4), sample['mon_coverage'])
        self.assertEqual(len(readings),
                         sum(s['with_value'] for s in samples))
        self.assertEqual(sum(run['reasons'].values()),
                         sum(s['without_value'] for s in samples))
        self.assertIn('rotated out (RMID budget)', run['reasons'])
        self.assertEqual(sorted({r['uuid'] for r in readings}),
                         run['measured'])
        self.assertIn('over %d readings; readings from a group without '
                      'their truth: 0' % len(readings), text)
        self.assertIn('instances measured at least once: %d of 3' % len(
            run['measured']), text)
        self.assertIn('rotating True', text)
        self.assertEqual([rates.RATES_TARGET_TEXT],
                         unit.printed_targets(text))

    def assert_compared_with_its_truth(self, injected, reading):
        # The group the rate was read from holds this instance's truth,
        # and it is the group the state document names.
        owner, path, want = injected[reading['key']]
        self.assertEqual(reading['uuid'], owner)
        self.assertEqual(reading['uuid'], reading['owner'])
        self.assertEqual(path.replace('mon_groups/', ''),
                         reading['counters'])
        self.assertEqual(want, reading['want'])
        self.assertEqual(abs(reading['got'] - want) / want,
                         reading['error'])


class AdmissionBenchmarkTest(base.TestCase):

    def test_a_count_not_ended_by_enospc_is_no_limit(self):
        # A guest refused for another reason (here none admitted) would
        # make any ratio; the benchmark must not call that met.
        admission = unit.load('agent_admission')
        found = dict(admitted=0, refusal='XML error', errno=None,
                     closids=8, groups=[])
        out = io.StringIO()
        with mock.patch.object(admission.launcher, 'missing_prerequisites',
                               return_value=[]), \
                mock.patch.object(admission, 'per_instance_real',
                                  return_value=found), \
                mock.patch.object(admission, 'EmulatedHost'), \
                mock.patch.object(admission, 'shared_emulated',
                                  return_value=(5, 5)), \
                contextlib.redirect_stdout(out):
            self.assertEqual(1, admission.main(['--shared', '5']))
        self.assertIn('did not end at the CLOSIDs running out', out.getvalue())
        self.assertIn(': NOT met', out.getvalue())


class SandboxBenchmarkTest(AgentBenchmarkBase):
    """Benchmarks that start a sandbox: real libvirtd and KVM guests."""

    def setUp(self):
        super().setUp()
        self.require(*emulated.sandbox_prerequisites())
        # The benchmarks run the agent's privileged calls in-process.
        self.addCleanup(privsep.sys_admin_pctxt.set_client_mode, True)

    def test_fast_path_places_every_vcpu_of_every_guest(self):
        fast = unit.load('agent_fast_path')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertIn(fast.main(['--guests', '3', '--vcpus', '2']),
                          (0, 1))
        guests = fast.LAST_RUN['guests']
        self.assertEqual(3, len({g['uuid'] for g in guests}))
        # One guest per shared group of the three percentages.
        self.assertEqual(['rdtvirt-mb10', 'rdtvirt-mb20', 'rdtvirt-mb30'],
                         [g['group'] for g in guests])
        self.assert_placed(guests, 2)
        broken = copy.deepcopy(guests)
        broken[1]['mon_tasks'].discard(broken[1]['qemu'][1])
        self.assertRaises(AssertionError, self.assert_placed, broken, 2)
        text = out.getvalue()
        self.assertIn('guests 3 x 2 vCPUs', text)
        self.assertEqual(unit.source_targets('agent_fast_path'),
                         unit.printed_targets(text))

    def assert_placed(self, guests, vcpus):
        for g in guests:
            # QEMU's own answer names one thread per vCPU, and the agent
            # found the same threads for the same vCPUs.
            self.assertEqual(vcpus, len(set(g['qemu'])), g)
            self.assertEqual(g['qemu'], g['agent'], g)
            # Every vCPU ended in the shared group, and its monitoring
            # group holds the vCPUs.
            self.assertLessEqual(set(g['qemu']), g['group_tasks'], g)
            self.assertEqual(set(g['qemu']), g['mon_tasks'], g)
            # One latency, of this guest's start event.
            self.assertEqual(1, len(g['latencies']), g)
            self.assertGreater(g['latencies'][0], 0, g)

    def test_admission_counts_what_the_ratio_is_made_of(self):
        admission = unit.load('agent_admission')
        out = io.StringIO()
        # The limit bounds the run should libvirt stop making a group per
        # guest (the reference host refuses the eighth).
        with contextlib.redirect_stdout(out):
            self.assertIn(admission.main(
                ['--shared', '7', '--per-instance-limit', '12']), (0, 1))
        text = out.getvalue()
        run = admission.LAST_RUN
        per = run['per_instance']
        self.assertEqual('real libvirtd + KVM guests with <memorytune>',
                         per['how'])
        # Guests were started until libvirt could make no more groups:
        # the CLOSIDs ran out, not anything else.
        self.assertEqual(errno.ENOSPC, per['errno'], per['refusal'])
        self.assertIn(os.strerror(errno.ENOSPC), per['refusal'])
        # One CLOSID each; the default group holds one.
        self.assertEqual(8, per['closids'])
        self.assertEqual(per['closids'] - 1, per['admitted'])
        self.assertEqual(per['admitted'], len(per['groups']))
        # Every instance of the shared half placed, one per percentage.
        self.assertEqual(dict(admitted=7, tried=7, groups=7), run['shared'])
        self.assertEqual(1.0, run['ratio'])
        self.assertIn('per-instance strategy: 7 throttled instances '
                      'admitted', text)
        self.assertIn('shared strategy: 7 of 7 throttled instances '
                      'admitted and placed, in 7 shared groups', text)
        self.assertIn('ratio shared / per-instance: 1.0x', text)
        self.assertEqual(unit.source_targets('agent_admission'),
                         unit.printed_targets(text))
        # libvirt's mkdir replayed on the emulator stops where libvirt did.
        env = self.common.EmulatedHost()
        self.addCleanup(env.close)
        replay = admission.per_instance_emulated(env)
        self.assertEqual((per['admitted'], errno.ENOSPC),
                         (replay['admitted'], replay['errno']))
